// Photo upload through ProfileService/UploadPhoto: a header, then the file in 1 MiB chunks, sent as one buffered
// Connect client stream (a browser cannot stream a request body over HTTP/1.1; the whole photo, at most 15 MiB,
// goes in one POST). The idempotency key makes a retried upload return the first result.
import { base64, uuid } from "./dom.js";

const CHUNK = 1 << 20;
const TYPES = { "image/jpeg": true, "image/png": true, "image/webp": true, "image/heic": true };

export async function uploadPhoto(session, file, position) {
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
