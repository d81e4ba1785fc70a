// The member's live events (ChatService/Subscribe, a Connect server stream): new messages, receipts, new matches,
// closed threads. A dropped stream is opened again with the last resume token, after a backoff of 0.5 s doubling
// to 15 s, so no event is lost or shown twice; when the server can no longer resume, "resync" asks the screens to
// reload what they show.
export class LiveEvents extends EventTarget {
  constructor(session) {
    super();
    this.session = session;
    this.resumeToken = sessionStorage.getItem("kindred.resume") || "";
    this.controller = null;
    this.connected = false;
    this.seen = new Set();
  }

  start() {
    if (this.controller) return;
    this.controller = new AbortController();
    this.run(this.controller.signal);
  }

  stop() {
    this.controller?.abort();
    this.controller = null;
    this.setConnected(false);
  }

  setConnected(connected) {
    if (this.connected !== connected) {
      this.connected = connected;
      this.dispatchEvent(new CustomEvent("connection", { detail: { connected } }));
    }
  }

  async run(signal) {
    let delay = 500;
    while (!signal.aborted) {
      try {
        await this.session.serverStream("ChatService", "Subscribe", { resumeToken: this.resumeToken }, (event) => {
          this.setConnected(true);
          delay = 500;
          this.handle(event);
        }, { signal });
      } catch (error) {
        if (signal.aborted) return;
        if (error.code === "unauthenticated") {
          try {
            await this.session.refresh();
            continue;
          } catch {
            return;
          }
        }
      }
      this.setConnected(false);
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 15000);
    }
  }

  handle(event) {
    if (event.resumeToken) {
      this.resumeToken = event.resumeToken;
      sessionStorage.setItem("kindred.resume", event.resumeToken);
    }
    const kinds = ["message", "readReceipt", "deliveryReceipt", "matchCreated", "threadClosed", "typing"];
    for (const kind of kinds) {
      if (event[kind]) {
        if (kind === "message") {
          if (this.seen.has(event.message.messageId)) return;
          this.seen.add(event.message.messageId);
        }
        this.dispatchEvent(new CustomEvent(kind, { detail: event[kind] }));
      }
    }
    if (event.resyncRequired) {
      this.resumeToken = "";
      sessionStorage.removeItem("kindred.resume");
      this.dispatchEvent(new CustomEvent("resync"));
    }
  }
}
