cmd => {
  const at = performance.now();
  try {
    const r = window.streamcheck.command(cmd);
    if (r && typeof r.then === "function")
      r.then(undefined, e => window.__streamcheckFault(cmd.cmd, String((e && e.stack) || e)));
    return [null, at];
  } catch (e) { return [String((e && e.stack) || e), at]; }
}
