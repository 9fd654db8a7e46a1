([kind, since, timeout]) => window.__streamcheckLag.seen(kind, since, timeout)
