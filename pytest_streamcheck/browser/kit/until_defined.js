() => new Promise((resolve, reject) => {
  const poll = () => {
    try {
      const api = window.streamcheck;
      if (typeof api === "object" && api !== null
        && typeof api.hello === "function" && typeof api.command === "function") {
        resolve(true);
        return;
      }
    } catch (error) {
      reject(error);
      return;
    }
    setTimeout(poll, 10);
  };
  poll();
})
