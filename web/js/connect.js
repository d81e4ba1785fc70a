// A Connect protocol client over fetch (https://connectrpc.com/docs/protocol): unary calls as JSON POSTs,
// server streams and buffered client streams as application/connect+json envelopes. No dependencies.

/** An RPC that failed: `code` is the Connect code ("not_found", "unauthenticated", …). */
export class ConnectError extends Error {
  constructor(code, message, detail = {}) {
    super(message || code);
    this.code = code;
    this.reason = detail.reason || "";
    this.retryAfterMs = detail.retryAfterMs || 0;
    this.requestId = detail.requestId || "";
    this.fieldViolations = detail.fieldViolations || [];
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** One envelope: flags byte, 4-byte big-endian length, the JSON. */
export function envelope(message, flags = 0) {
  const payload = encoder.encode(JSON.stringify(message));
  const framed = new Uint8Array(5 + payload.length);
  framed[0] = flags;
  new DataView(framed.buffer).setUint32(1, payload.length);
  framed.set(payload, 5);
  return framed;
}

/** Reads a varint at `offset` of `bytes`: [value, next offset]. */
function varint(bytes, offset) {
  let value = 0, shift = 0, byte;
  do {
    byte = bytes[offset++];
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
  } while (byte & 0x80 && offset < bytes.length);
  return [value, offset];
}

/** The fields of kindred.common.v1.ErrorDetail a client uses, from its binary form (base64). */
function decodeErrorDetail(base64) {
  const text = atob(base64.replace(/-/g, "+").replace(/_/g, "/"));
  const bytes = Uint8Array.from(text, (c) => c.charCodeAt(0));
  const detail = { fieldViolations: [] };
  let offset = 0;
  while (offset < bytes.length) {
    let tag, length, value;
    [tag, offset] = varint(bytes, offset);
    const field = Math.floor(tag / 8), wire = tag & 7;
    if (wire === 0) {
      [value, offset] = varint(bytes, offset);
      if (field === 3) detail.retryAfterMs = value;
    } else if (wire === 2) {
      [length, offset] = varint(bytes, offset);
      const chunk = bytes.subarray(offset, offset + length);
      offset += length;
      if (field === 1) detail.reason = decoder.decode(chunk);
      if (field === 4) detail.requestId = decoder.decode(chunk);
      if (field === 2) detail.fieldViolations.push(chunk);
    } else if (wire === 1) offset += 8;
    else if (wire === 5) offset += 4;
    else break;
  }
  return detail;
}

/** A ConnectError from a Connect error JSON ({code, message, details}). */
export function errorFrom(json, fallbackCode = "unknown") {
  let detail = {};
  for (const item of json?.details || []) {
    if (item.type === "kindred.common.v1.ErrorDetail") {
      try {
        detail = item.debug && item.debug.reason ? item.debug : decodeErrorDetail(item.value);
      } catch {
        /* an unreadable detail: the code is enough */
      }
    }
  }
  return new ConnectError(json?.code || fallbackCode, json?.message || "", detail);
}

// HTTP status → Connect code, for answers without a Connect error body (a proxy, a dropped connection).
export const HTTP_CODES = { 400: "internal", 401: "unauthenticated", 403: "permission_denied", 404: "unimplemented",
  408: "deadline_exceeded", 429: "unavailable", 502: "unavailable", 503: "unavailable", 504: "unavailable" };

export class ConnectClient {
  /**
   * @param {string} baseUrl the gateway, e.g. "http://127.0.0.1:50050"
   * @param {() => string|null} token the current access token, or null
   */
  constructor(baseUrl, token) {
    this.baseUrl = baseUrl.replace(/\/$/, "");
    this.token = token;
  }

  headers(contentType, timeoutMs) {
    const headers = { "Content-Type": contentType, "Connect-Protocol-Version": "1" };
    if (timeoutMs) headers["Connect-Timeout-Ms"] = String(timeoutMs);
    const token = this.token();
    if (token) headers.Authorization = `Bearer ${token}`;
    return headers;
  }

  /** A unary call: the response message, or throws ConnectError. */
  async unary(service, method, request = {}, { timeoutMs = 15000, signal } = {}) {
    let response;
    try {
      response = await fetch(`${this.baseUrl}/kindred.api.v1.${service}/${method}`, {
        method: "POST", headers: this.headers("application/json", timeoutMs), body: JSON.stringify(request), signal,
      });
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new ConnectError("unavailable", "The server cannot be reached. Check your connection.");
    }
    const text = await response.text();
    let json = null;
    try {
      json = text ? JSON.parse(text) : {};
    } catch {
      /* not JSON: mapped by status below */
    }
    if (response.ok && json) return json;
    throw errorFrom(json, HTTP_CODES[response.status] || "unknown");
  }

  /**
   * A server stream: calls onMessage for each response message; resolves when the stream ends cleanly, throws
   * ConnectError when it ends with an error (or the connection drops: "unavailable").
   */
  async serverStream(service, method, request, onMessage, { signal } = {}) {
    return this.streamCall(service, method, envelope(request), onMessage, signal);
  }

  /** A client stream sent whole (browsers cannot stream a request body over HTTP/1.1): the one response. */
  async clientStream(service, method, requests, { signal } = {}) {
    const parts = requests.map((request) => envelope(request));
    const body = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
    let offset = 0;
    for (const part of parts) {
      body.set(part, offset);
      offset += part.length;
    }
    let result = null;
    await this.streamCall(service, method, body, (message) => { result = message; }, signal, 120000);
    if (!result) throw new ConnectError("internal", "The server sent no answer.");
    return result;
  }

  async streamCall(service, method, body, onMessage, signal, timeoutMs) {
    let response;
    try {
      response = await fetch(`${this.baseUrl}/kindred.api.v1.${service}/${method}`, {
        method: "POST", headers: this.headers("application/connect+json", timeoutMs), body, signal,
      });
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new ConnectError("unavailable", "The server cannot be reached.");
    }
    if (!response.ok || !response.body) {
      let json = null;
      try {
        json = await response.json();
      } catch {
        /* mapped by status */
      }
      throw errorFrom(json, HTTP_CODES[response.status] || "unknown");
    }
    const reader = response.body.getReader();
    let buffer = new Uint8Array(0);
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (error) {
        if (error.name === "AbortError") throw error;
        throw new ConnectError("unavailable", "The connection dropped.");
      }
      if (chunk.done) throw new ConnectError("unavailable", "The stream ended without its end message.");
      const joined = new Uint8Array(buffer.length + chunk.value.length);
      joined.set(buffer);
      joined.set(chunk.value, buffer.length);
      buffer = joined;
      while (buffer.length >= 5) {
        const length = new DataView(buffer.buffer, buffer.byteOffset).getUint32(1);
        if (buffer.length < 5 + length) break;
        const flags = buffer[0];
        const payload = JSON.parse(decoder.decode(buffer.subarray(5, 5 + length)) || "{}");
        buffer = buffer.slice(5 + length);
        if (flags & 2) {
          if (payload.error) throw errorFrom(payload.error);
          return;
        }
        onMessage(payload);
      }
    }
  }
}
