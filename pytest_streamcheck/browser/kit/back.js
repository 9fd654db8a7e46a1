async (timeout) => {
  const end = performance.now() + timeout;
  for (;;) {
    try {
      await fetch(location.origin + "/__streamcheck/online", { cache: "no-store" });
      return true;
    } catch (e) {
      if (performance.now() > end) return false;
      await new Promise((wake) => setTimeout(wake, 1));
    }
  }
}
