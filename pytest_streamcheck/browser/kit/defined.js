() => typeof window.streamcheck === "object" && window.streamcheck !== null
  && typeof window.streamcheck.hello === "function"
  && typeof window.streamcheck.command === "function"
