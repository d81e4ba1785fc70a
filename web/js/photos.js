// Photo upload by URL: ProfileService/CreateUploadUrl returns a signed URL on the media port, and the file goes
// there in one plain PUT (the browser streams it from disk; no base64, no envelopes). A retried PUT of the same URL
// answers the photo the first one stored. Deployments without a media port answer CreateUploadUrl with
// unimplemented; the app then sends the photo through UploadPhoto as one buffered Connect client stream.
import { ConnectError, errorFrom, HTTP_CODES } from "./connect.js";
import { base64, uuid } from "./dom.js";

const CHUNK = 1 << 20;
const TYPES = { "image/jpeg": true, "image/png": true, "image/webp": true, "image/heic": true };

export async function uploadPhoto(session, file, position) {
  let grant;
  try {
    grant = await session.call("ProfileService", "CreateUploadUrl", { position });
  } catch (failure) {
    if (failure.code === "unimplemented") return uploadPhotoAsStream(session, file, position);
    throw failure;
  }
  const type = TYPES[file.type] ? file.type : "image/jpeg";
  for (let attempt = 0; ; attempt++) {
    try {
      return await put(grant.uploadUrl, file, type);
    } catch (failure) {
      if (failure.code !== "unavailable" || attempt === 2) throw failure;
      await new Promise((resolve) => setTimeout(resolve, 1000 * (attempt + 1)));
    }
  }
}

/** One PUT of the file to a signed upload URL: the UploadPhotoResponse, or throws ConnectError. */
async function put(url, file, type) {
  let response;
  try {
    response = await fetch(url, { method: "PUT", headers: { "Content-Type": type }, body: file });
  } catch {
    throw new ConnectError("unavailable", "The server cannot be reached. Check your connection.");
  }
  let json = null;
  try {
    json = await response.json();
  } catch {
    /* not JSON: mapped by status below */
  }
  if (response.ok && json) return json;
  throw errorFrom(json, HTTP_CODES[response.status] || "unknown");
}

/** UploadPhoto: a header, then the file in 1 MiB chunks, sent as one buffered Connect client stream. */
async function uploadPhotoAsStream(session, file, position) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  const header = {
    contentType: TYPES[file.type] ? file.type : "image/jpeg",
    totalSizeBytes: String(bytes.length),
    position,
    idempotencyKey: uuid(),
  };
  if (crypto.subtle) header.sha256 = base64(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)));
  const requests = [{ header }];
  for (let offset = 0; offset < bytes.length; offset += CHUNK) {
    requests.push({ chunk: base64(bytes.subarray(offset, offset + CHUNK)) });
  }
  for (let attempt = 0; ; attempt++) {
    try {
      return await session.clientStream("ProfileService", "UploadPhoto", requests);
    } catch (failure) {
      if (failure.code !== "unavailable" || attempt === 2) throw failure;
      await new Promise((resolve) => setTimeout(resolve, 1000 * (attempt + 1)));
    }
  }
}
