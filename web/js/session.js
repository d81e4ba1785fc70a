// The signed-in member's session: tokens kept in this browser's localStorage (bearer tokens only, no cookies),
// refreshed a minute before they expire or when a call answers unauthenticated, and the API calls made with them.
import { ConnectClient, ConnectError } from "./connect.js";

const STORAGE_KEY = "kindred.session";

export class Session {
  constructor(baseUrl) {
    this.saved = JSON.parse(localStorage.getItem(STORAGE_KEY) || "null");
    this.client = new ConnectClient(baseUrl, () => this.saved?.tokens?.accessToken || null);
    this.refreshing = null;
    this.onSignedOut = () => {};
  }

  get signedIn() {
    return Boolean(this.saved?.tokens?.refreshToken);
  }

  get communityId() {
    return this.saved?.communityId || "dating";
  }

  get userId() {
    return this.saved?.account?.userId || "";
  }

  store(communityId, tokens, account) {
    this.saved = { communityId, tokens, account };
    localStorage.setItem(STORAGE_KEY, JSON.stringify(this.saved));
  }

  async signIn(communityId, login, password) {
    const answer = await this.client.unary("AccountService", "SignIn", {
      communityId, login, password, client: { deviceName: "Web", userAgent: navigator.userAgent.slice(0, 256) },
    });
    this.store(communityId, answer.tokens, answer.account);
    return answer.account;
  }

  forget() {
    this.saved = null;
    localStorage.removeItem(STORAGE_KEY);
  }

  async signOut() {
    try {
      await this.client.unary("AccountService", "SignOut", { refreshToken: this.saved?.tokens?.refreshToken || "" });
    } catch {
      /* signed out locally either way */
    }
    this.forget();
  }

  /** Refreshes the tokens once for every caller waiting on it (a refresh token is single-use). */
  refresh() {
    if (!this.refreshing) {
      const refreshToken = this.saved?.tokens?.refreshToken;
      this.refreshing = (async () => {
        try {
          const answer = await this.client.unary("AccountService", "Refresh", { refreshToken });
          this.store(this.communityId, answer.tokens, this.saved?.account);
        } catch (error) {
          if (error.code === "unauthenticated") {
            this.forget();
            this.onSignedOut();
          }
          throw error;
        } finally {
          this.refreshing = null;
        }
      })();
    }
    return this.refreshing;
  }

  async freshToken() {
    const expires = Number(this.saved?.tokens?.accessTokenExpiresUnixMs || 0);
    if (this.signedIn && expires && expires - Date.now() < 60000) await this.refresh();
  }

  /** A unary call as the member; on unauthenticated, refreshes and tries once more. */
  async call(service, method, request = {}, options = {}) {
    await this.freshToken();
    try {
      return await this.client.unary(service, method, request, options);
    } catch (error) {
      if (!(error instanceof ConnectError) || error.code !== "unauthenticated" || !this.signedIn) throw error;
      await this.refresh();
      return this.client.unary(service, method, request, options);
    }
  }

  async serverStream(service, method, request, onMessage, options = {}) {
    await this.freshToken();
    return this.client.serverStream(service, method, request, onMessage, options);
  }

  async clientStream(service, method, requests, options = {}) {
    await this.freshToken();
    return this.client.clientStream(service, method, requests, options);
  }
}
