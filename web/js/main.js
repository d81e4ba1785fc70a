// Kindred on the web: sign up or in, a profile with photos, the deck, "It's a match", matches and likes, live chat,
// block and report. Every call goes to the gateway's public API as Connect JSON (see docs/api).
import { Session } from "./session.js";
import { LiveEvents } from "./live.js";
import { h, clear, toast, uuid } from "./dom.js";
import { uploadPhoto } from "./photos.js";

const COMMUNITIES = [
  ["dating", "Dating"], ["bizmatch", "Business"], ["playdates", "Dog playdates"], ["fitness", "Fitness buddies"],
];
const GENDERS = [["GENDER_WOMAN", "Woman"], ["GENDER_MAN", "Man"], ["GENDER_NONBINARY", "Non-binary"]];
// Places to stand in when the browser cannot tell (coordinates go to the server only, which keeps a coarse cell).
const PLACES = [
  ["Berlin", 52.52, 13.405], ["Lisbon", 38.7223, -9.1393], ["Austin", 30.2672, -97.7431],
  ["Nairobi", -1.2921, 36.8219], ["Seoul", 37.5665, 126.978], ["Paris", 48.8566, 2.3522],
];
const REPORT_REASONS = [
  ["REPORT_REASON_SPAM", "Spam"], ["REPORT_REASON_INAPPROPRIATE_CONTENT", "Inappropriate content"],
  ["REPORT_REASON_HARASSMENT", "Harassment"], ["REPORT_REASON_FAKE_PROFILE", "Fake profile"],
  ["REPORT_REASON_UNDERAGE", "Underage"], ["REPORT_REASON_SCAM", "Scam"],
  ["REPORT_REASON_OFFLINE_BEHAVIOUR", "Offline behaviour"], ["REPORT_REASON_OTHER", "Something else"],
];
const REASONS = {
  INVALID_CREDENTIALS: "Wrong email, username or password.",
  EMAIL_NOT_VERIFIED: "Confirm your email first: enter the code we sent.",
  ACCOUNT_DEACTIVATED: "This account has been deactivated.",
  USERNAME_TAKEN: "That username is taken.",
  PASSWORD_TOO_COMMON: "That password is too common. Pick another one.",
  TOKEN_EXPIRED: "The code has expired. Ask for a new one.",
  BELOW_MINIMUM_AGE: "You are below this community's minimum age.",
  LOCATION_REQUIRED: "Set your location to see people near you.",
  PROFILE_INCOMPLETE: "Finish your profile to see people.",
  PHOTO_LIMIT_REACHED: "You have the most photos a profile can have.",
  UNSUPPORTED_IMAGE: "That file is not a photo we can use (JPEG, PNG, WebP or HEIC).",
  UPLOAD_TOO_LARGE: "That photo is too large (15 MB at most).",
  IMPLAUSIBLE_LOCATION_JUMP: "That location is too far from your last one.",
  RATE_LIMITED: "Slow down a little and try again.",
};

const app = document.getElementById("app");
let session;
let live;
let community = null;
let me = null;
let screen = { name: "" };

function describe(error) {
  if (REASONS[error.reason]) return REASONS[error.reason];
  if (error.fieldViolations?.length && error.message) return error.message;
  if (error.code === "unavailable") return "Kindred is not answering right now. Try again in a moment.";
  if (error.code === "resource_exhausted") return "Too many tries. Wait a moment and try again.";
  return error.message || "Something went wrong.";
}

function photoUrl(photo, variant = "PHOTO_VARIANT_CARD") {
  const urls = photo?.urls || [];
  const pick = urls.find((u) => u.variant === variant && u.format === "webp")
    || urls.find((u) => u.variant === variant) || urls[0];
  return pick?.url || "";
}

function avatar(profile, size = "") {
  const url = photoUrl(profile?.photos?.[0], "PHOTO_VARIANT_THUMBNAIL");
  return url ? h(`img.avatar${size}`, { src: url, alt: "" })
    : h(`div.avatar.placeholder${size}`, {}, (profile?.displayName || "?").slice(0, 1));
}

function busy(button, text) {
  const original = button.textContent;
  button.disabled = true;
  button.textContent = text;
  return () => {
    button.disabled = false;
    button.textContent = original;
  };
}

function field(label, input, hint) {
  return h("label.field", {}, h("span", {}, label), input, hint ? h("small", {}, hint) : null);
}

// --- Start ----------------------------------------------------------------------------------------------------

async function boot() {
  let config = {};
  try {
    config = await (await fetch("config.json", { cache: "no-cache" })).json();
  } catch {
    /* served elsewhere: the page's host and the default port */
  }
  const apiUrl = config.apiURL || `${location.protocol}//${location.hostname}:${config.apiPort || 50050}`;
  session = new Session(apiUrl);
  session.onSignedOut = () => {
    live?.stop();
    live = null;
    sessionStorage.removeItem("kindred.resume");
    showAuth("signin", "Your session ended. Sign in again.");
  };
  if (session.signedIn) enterApp();
  else showAuth("signup");
}

// --- Sign up, verify, sign in ---------------------------------------------------------------------------------

function communitySelect(selected) {
  return h("select", { name: "community" },
    COMMUNITIES.map(([id, label]) => h("option", { value: id, selected: id === selected }, label)));
}

function showAuth(mode = "signup", notice = "") {
  screen = { name: "auth" };
  const error = h("p.error", { role: "alert" });
  const signingUp = mode === "signup";
  const form = h("form.card-form", { novalidate: true },
    h("div.segmented", {},
      h("button", { type: "button", class: signingUp ? "active" : "", "data-test": "tab-signup",
        onclick: () => showAuth("signup") }, "Create account"),
      h("button", { type: "button", class: signingUp ? "" : "active", "data-test": "tab-signin",
        onclick: () => showAuth("signin") }, "Sign in")),
    notice ? h("p.notice", {}, notice) : null,
    field("Community", communitySelect(session.communityId)),
    signingUp
      ? [field("Email", h("input", { name: "email", type: "email", autocomplete: "email", required: true })),
        field("Username", h("input", { name: "username", autocomplete: "username", required: true,
          minlength: 3, maxlength: 30 }), "3–30 letters, digits, _ or .")]
      : field("Email or username", h("input", { name: "login", autocomplete: "username", required: true })),
    field("Password", h("input", { name: "password", type: "password", required: true, minlength: signingUp ? 8 : 1,
      autocomplete: signingUp ? "new-password" : "current-password" }), signingUp ? "At least 8 characters." : null),
    error,
    h("button.primary", { type: "submit", "data-test": "submit" }, signingUp ? "Create account" : "Sign in"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    const done = busy(form.querySelector("[type=submit]"), signingUp ? "Creating…" : "Signing in…");
    error.textContent = "";
    try {
      if (signingUp) {
        await session.client.unary("AccountService", "SignUp", {
          communityId: data.community, email: data.email, username: data.username, password: data.password,
          locale: navigator.language?.slice(0, 35) || "en",
        });
        showVerify(data.community, data.email, data.password);
      } else {
        await session.signIn(data.community, data.login, data.password);
        enterApp();
      }
    } catch (failure) {
      if (failure.reason === "EMAIL_NOT_VERIFIED" && !signingUp) {
        showVerify(data.community, data.login.includes("@") ? data.login : "", data.password);
        return;
      }
      error.textContent = describe(failure);
      done();
    }
  });
  clear(app, h("main.auth", {},
    h("div.brand", {}, h("img", { src: "icon.svg", alt: "" }), h("h1", {}, "Kindred"),
      h("p", {}, "Meet people who like what you like, near you.")),
    form));
}

function showVerify(communityId, email, password) {
  screen = { name: "verify" };
  const error = h("p.error", { role: "alert" });
  const form = h("form.card-form", {},
    h("h2", {}, "Check your email"),
    h("p", {}, "We sent a 6-digit code to ", h("strong", {}, email || "your address"), "."),
    h("p.hint", {}, "Running the demo cluster? The code is in the mail sink's log: ",
      h("code", {}, "grep code= .cluster/logs/smtp-sink.log")),
    email ? null : field("Email", h("input", { name: "email", type: "email", required: true })),
    field("Code", h("input", { name: "code", inputmode: "numeric", autocomplete: "one-time-code", maxlength: 6,
      pattern: "[0-9]{6}", required: true, class: "code" })),
    error,
    h("button.primary", { type: "submit", "data-test": "verify" }, "Confirm"),
    h("button.link", { type: "button", onclick: async () => {
      try {
        await session.client.unary("AccountService", "ResendVerification", { communityId, email });
        toast("A new code is on its way.");
      } catch (failure) {
        toast(describe(failure), "error");
      }
    } }, "Send a new code"),
    h("button.link", { type: "button", onclick: () => showAuth("signin") }, "Back to sign in"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = Object.fromEntries(new FormData(form));
    const address = email || data.email;
    const done = busy(form.querySelector("[type=submit]"), "Confirming…");
    error.textContent = "";
    try {
      await session.client.unary("AccountService", "VerifyEmail", { code: { communityId, email: address,
        code: data.code.trim() } });
      if (password) {
        await session.signIn(communityId, address, password);
        enterApp();
      } else {
        showAuth("signin", "Email confirmed. Sign in.");
      }
    } catch (failure) {
      error.textContent = describe(failure);
      done();
    }
  });
  clear(app, h("main.auth", {}, form));
}

// --- The app --------------------------------------------------------------------------------------------------

async function enterApp() {
  clear(app, h("main.loading", {}, h("div.spinner")));
  let home;
  try {
    home = await session.call("HomeService", "GetHome", { deckPageSize: 10, matchesPageSize: 20 });
  } catch (failure) {
    if (failure.code === "unauthenticated") return showAuth("signin", "Sign in again.");
    clear(app, h("main.auth", {}, h("div.card-form", {}, h("h2", {}, "Cannot reach Kindred"),
      h("p", {}, describe(failure)), h("button.primary", { onclick: enterApp }, "Try again"))));
    return;
  }
  community = home.community || community;
  me = home.profile || null;
  if (!live) {
    live = new LiveEvents(session);
    live.addEventListener("matchCreated", (event) => {
      const match = event.detail.match;
      if (screen.name !== "chat") showMatchOverlay(match?.profile, match, event.detail.otherUserId);
      if (screen.name === "matches") showMatches();
    });
    live.addEventListener("message", (event) => onLiveMessage(event.detail));
    live.addEventListener("threadClosed", (event) => {
      if (screen.name === "chat" && screen.threadId === event.detail.threadId) screen.closed();
      if (screen.name === "matches") showMatches();
    });
    live.addEventListener("resync", () => {
      if (screen.name === "matches") showMatches();
      if (screen.name === "chat") screen.reload();
    });
    live.addEventListener("connection", (event) => {
      document.body.classList.toggle("offline", !event.detail.connected);
    });
  }
  live.start();
  if (home.needsProfile) return showCreateProfile();
  showDeck(home.deck, home.deckNextPageToken);
}

function layout(active, title, content, actions = null) {
  const tab = (name, label, icon, open) => h("button", { class: name === active ? "active" : "", "data-test": `nav-${name}`,
    onclick: open, "aria-label": label }, h("span.icon", {}, icon), h("span", {}, label));
  clear(app, h("div.shell", {},
    h("header.bar", {}, h("h1", {}, title), actions),
    h("main.content", {}, content),
    h("nav.tabs", {},
      tab("deck", "Discover", "✦", () => showDeck()),
      tab("matches", "Matches", "♥", () => showMatches()),
      tab("me", "Profile", "☺", () => showMe()))));
}

// --- Deck -----------------------------------------------------------------------------------------------------

let deck = { cards: [], next: "", loaded: false };

async function showDeck(cards, next) {
  screen = { name: "deck" };
  if (cards) deck = { cards: [...cards], next: next || "", loaded: true };
  const stage = h("div.stage");
  layout("deck", "Discover", stage, h("button.icon-button", { title: "Reload", "aria-label": "Reload", onclick: () => {
    deck = { cards: [], next: "", loaded: false };
    showDeck();
  } }, "↻"));
  // An empty hand asks for more (the next page, or a fresh deck: people join and finish profiles all the time).
  if (!cards && deck.cards.length === 0) {
    clear(stage, h("div.spinner"));
    try {
      const request = { pageSize: 10, pageToken: deck.next || "" };
      const page = await session.call("DeckService", "GetDeck", request).catch((failure) => {
        if (failure.reason !== "PAGE_TOKEN_INVALID") throw failure;
        return session.call("DeckService", "GetDeck", { pageSize: 10 });  // expired: start a fresh deck
      });
      deck = { cards: page.cards || [], next: page.nextPageToken || "", loaded: true,
        widened: page.widened, radiusKm: page.radiusKm };
    } catch (failure) {
      clear(stage, empty("⚑", describe(failure),
        failure.code === "failed_precondition" ? h("button.primary", { onclick: showMe }, "Open your profile") : null));
      return;
    }
  }
  if (screen.name !== "deck") return;
  renderDeck(stage);
}

function empty(icon, text, action = null) {
  return h("div.empty", {}, h("div.big", {}, icon), h("p", {}, text), action);
}

function renderDeck(stage) {
  const card = deck.cards[0];
  if (!card) {
    clear(stage, empty("☕", "No one new around right now. Check back soon.",
      h("button.secondary", { "data-test": "look-again", onclick: () => showDeck() }, "Look again")));
    return;
  }
  const element = profileCard(card.profile, { topPick: card.topPick, shared: card.sharedAttributeKeys });
  const decide = (action) => swipe(card, action, element, stage);
  enableDrag(element, decide);
  clear(stage,
    deck.widened ? h("p.notice", {}, `Showing people up to ${deck.radiusKm} km away.`) : null,
    h("div.deck", {}, deck.cards[1] ? profileCard(deck.cards[1].profile, { behind: true }) : null, element),
    h("div.actions", {},
      h("button.round.pass", { "aria-label": "Pass", "data-test": "pass", onclick: () => decide("SWIPE_ACTION_PASS") }, "✕"),
      h("button.round.like", { "aria-label": "Like", "data-test": "like", onclick: () => decide("SWIPE_ACTION_LIKE") }, "♥")));
}

function profileCard(profile, { behind = false, topPick = false, shared = [] } = {}) {
  const photos = profile.photos || [];
  let index = 0;
  const image = h("img.photo", { alt: profile.displayName, src: photoUrl(photos[0]), draggable: false });
  const dots = h("div.dots", {}, photos.length > 1 ? photos.map((_, i) => h(`span${i === 0 ? ".on" : ""}`)) : null);
  const show = (next) => {
    index = (next + photos.length) % photos.length;
    image.src = photoUrl(photos[index]);
    [...dots.children].forEach((dot, i) => dot.classList.toggle("on", i === index));
  };
  const attributes = (profile.attributes || []).map((a) =>
    a.textValue || a.choiceValue || a.choiceValues?.values?.join(", ") || a.integerValue || (a.boolValue ? a.key : ""))
    .filter(Boolean);
  return h(`article.profile-card${behind ? ".behind" : ""}`, { "data-test": "card", "data-user": profile.userId },
    photos.length ? image : h("div.photo.placeholder", {}, (profile.displayName || "?").slice(0, 1)),
    dots,
    photos.length > 1 ? [
      h("button.tap.left", { "aria-label": "Previous photo", onclick: () => show(index - 1) }),
      h("button.tap.right", { "aria-label": "Next photo", onclick: () => show(index + 1) })] : null,
    h("div.info", {},
      topPick ? h("span.badge", {}, "Top pick") : null,
      h("h2", {}, profile.displayName, profile.ageYears ? h("span.age", {}, ` ${profile.ageYears}`) : null),
      h("p.meta", {}, [profile.jobTitle, profile.city, profile.distanceKm ? `${profile.distanceKm} km away` : null]
        .filter(Boolean).join(" · ")),
      profile.bio ? h("p.bio", {}, profile.bio) : null,
      h("div.chips", {}, (profile.interests || []).map((interest) =>
        h(`span.chip${shared.includes(interest) ? ".shared" : ""}`, {}, interest)),
      attributes.map((value) => h("span.chip", {}, value)))));
}

function enableDrag(element, decide) {
  let start = null;
  element.addEventListener("pointerdown", (event) => {
    if (event.target.closest("button")) return;
    start = { x: event.clientX, y: event.clientY };
    element.setPointerCapture(event.pointerId);
    element.classList.add("dragging");
  });
  element.addEventListener("pointermove", (event) => {
    if (!start) return;
    const dx = event.clientX - start.x;
    element.style.transform = `translateX(${dx}px) rotate(${dx / 20}deg)`;
    element.dataset.hint = dx > 60 ? "like" : dx < -60 ? "pass" : "";
  });
  const end = (event) => {
    if (!start) return;
    const dx = event.clientX - start.x;
    start = null;
    element.classList.remove("dragging");
    element.dataset.hint = "";
    if (dx > 110) decide("SWIPE_ACTION_LIKE");
    else if (dx < -110) decide("SWIPE_ACTION_PASS");
    else element.style.transform = "";
  };
  element.addEventListener("pointerup", end);
  element.addEventListener("pointercancel", end);
}

async function swipe(card, action, element, stage) {
  const liked = action === "SWIPE_ACTION_LIKE";
  element.classList.add(liked ? "fly-right" : "fly-left");
  stage.querySelectorAll(".actions button").forEach((button) => { button.disabled = true; });
  try {
    const result = await session.call("DeckService", "Swipe", { targetUserId: card.profile.userId, action,
      surface: "deck" });
    deck.cards.shift();
    if (result.outcome === "SWIPE_OUTCOME_MATCHED" || result.outcome === "SWIPE_OUTCOME_CONNECTED") {
      showMatchOverlay(result.match?.profile || card.profile, result.match);
    }
  } catch (failure) {
    if (failure.code === "not_found" || failure.reason === "ALREADY_SWIPED") deck.cards.shift();
    else toast(describe(failure), "error");
  }
  if (screen.name === "deck") showDeck();
}

const celebrated = new Set();

/** "It's a match", once per match (the swipe's answer and the live stream both tell it, in either order). */
function showMatchOverlay(profile, match, otherUserId = profile?.userId) {
  if (match?.matchId) {
    if (celebrated.has(match.matchId)) return;
    celebrated.add(match.matchId);
  }
  document.querySelector(".match-overlay")?.remove();
  const close = () => overlay.remove();
  const theirs = h("span", {}, avatar(profile, ".large"));
  const line = h("p", {}, `You and ${profile?.displayName || "your match"} like each other.`);
  if (match && otherUserId) match.otherUserId = otherUserId;
  if (match && !profile?.displayName && otherUserId) {
    // The stream's event may come without the card (and before the swipe's answer): fetch it.
    session.call("ProfileService", "GetProfile", { userId: otherUserId }).then((answer) => {
      match.profile = answer.profile;
      clear(theirs, avatar(answer.profile, ".large"));
      line.textContent = `You and ${answer.profile.displayName} like each other.`;
    }).catch(() => {});
  } else if (match && profile && !match.profile) {
    match.profile = profile;
  }
  const overlay = h("div.match-overlay", { role: "dialog", "aria-label": "It's a match", "data-test": "match-overlay" },
    h("div.burst", {},
      h("h2", {}, community?.settings?.mode === "COMMUNITY_MODE_ONE_WAY" ? "You're connected!" : "It's a match!"),
      h("div.pair", {}, avatar(me, ".large"), theirs),
      line,
      match ? h("button.primary", { "data-test": "open-chat", onclick: () => {
        close();
        openChat(match);
      } }, "Send a message") : null,
      h("button.link.light", { onclick: close }, "Keep swiping")));
  document.body.append(overlay);
}

// --- Matches and likes ----------------------------------------------------------------------------------------

async function showMatches() {
  screen = { name: "matches" };
  const content = h("div.lists", {}, h("div.spinner"));
  layout("matches", "Matches", content);
  let matches, likes;
  try {
    [matches, likes] = await Promise.all([
      session.call("MatchService", "ListMatches", { pageSize: 50 }),
      session.call("MatchService", "ListLikesReceived", { pageSize: 20 }).catch(() => ({ likes: [] })),
    ]);
  } catch (failure) {
    clear(content, empty("⚠", describe(failure)));
    return;
  }
  if (screen.name !== "matches") return;
  const likeRow = (likes.likes || []).filter((like) => like.profile).map((like) =>
    h("div.liker", { "data-test": "like-received" },
      h("img.like-photo", { src: photoUrl(like.profile.photos?.[0]), alt: "" }),
      h("span", {}, like.profile.displayName),
      h("div.mini-actions", {},
        h("button", { "aria-label": "Pass", onclick: () => likeBack(like.profile, "SWIPE_ACTION_PASS") }, "✕"),
        h("button.yes", { "aria-label": "Like back", onclick: () => likeBack(like.profile, "SWIPE_ACTION_LIKE") }, "♥"))));
  clear(content,
    h("section", {}, h("h3", {}, "Likes you", likes.totalCount ? h("span.count", {}, likes.totalCount) : null),
      likeRow.length ? h("div.likes", {}, likeRow) : h("p.muted", {}, "No new likes yet.")),
    h("section", {}, h("h3", {}, "Conversations"),
      (matches.matches || []).length
        ? h("ul.threads", {}, matches.matches.map((match) => h("li", {},
          h("button.thread", { "data-test": "match", "data-user": match.profile?.userId || "", onclick: () => openChat(match) },
            avatar(match.profile),
            h("div.thread-text", {},
              h("strong", {}, match.profile?.displayName || "Someone"),
              h("span.preview", {}, match.lastMessage?.body || "Say hello!")),
            match.unreadCount ? h("span.count", {}, match.unreadCount) : null))))
        : h("p.muted", {}, "No matches yet. Keep swiping!")));
}

async function likeBack(profile, action) {
  try {
    const result = await session.call("DeckService", "Swipe", { targetUserId: profile.userId, action, surface: "likes" });
    if (result.outcome === "SWIPE_OUTCOME_MATCHED" || result.outcome === "SWIPE_OUTCOME_CONNECTED") {
      showMatchOverlay(result.match?.profile || profile, result.match);
    }
  } catch (failure) {
    toast(describe(failure), "error");
  }
  showMatches();
}

// --- Chat -----------------------------------------------------------------------------------------------------

function onLiveMessage(message) {
  if (screen.name === "chat" && screen.threadId === message.threadId) screen.append(message);
  else if (message.senderUserId !== session.userId) {
    toast("New message");
    if (screen.name === "matches") showMatches();
  }
}

function bubble(message) {
  const mine = message.senderUserId === session.userId;
  return h(`div.bubble${mine ? ".mine" : ""}`, { "data-test": "message", "data-id": message.messageId },
    message.body,
    h("time", {}, new Date(Number(message.sentUnixMs)).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })));
}

async function openChat(match) {
  if (!match.profile?.displayName && match.otherUserId) {
    try {
      match.profile = (await session.call("ProfileService", "GetProfile", { userId: match.otherUserId })).profile;
    } catch {
      /* the header shows "Chat"; the conversation still works */
    }
  }
  const threadId = match.matchId;
  const other = match.profile;
  const list = h("div.messages", { "aria-live": "polite" });
  const input = h("textarea", { name: "body", rows: 1, maxlength: 2000, placeholder: "Write a message…",
    "data-test": "composer" });
  const send = h("button.send", { type: "submit", "aria-label": "Send", "data-test": "send" }, "➤");
  const composer = h("form.composer", {}, input, send);
  const shown = new Set();
  let newest = "";
  const append = (message) => {
    if (shown.has(message.messageId)) return;
    shown.add(message.messageId);
    // In sequence order, whichever arrives first (history or the live stream).
    const element = bubble(message);
    element.dataset.sequence = message.sequence;
    const later = [...list.children].find((other) => Number(other.dataset.sequence) > Number(message.sequence));
    list.insertBefore(element, later || null);
    list.scrollTop = list.scrollHeight;
    if (message.senderUserId !== session.userId) {
      newest = message.messageId;
      session.call("ChatService", "MarkRead", { threadId, upToMessageId: newest }).catch(() => {});
    }
  };
  const closed = () => {
    input.disabled = send.disabled = true;
    composer.replaceWith(h("p.ended", {}, "This conversation has ended."));
  };
  const reload = async () => {
    try {
      const page = await session.call("ChatService", "History", { threadId, pageSize: 50 });
      (page.messages || []).slice().reverse().forEach(append);
    } catch (failure) {
      if (failure.code === "not_found") closed();
      else toast(describe(failure), "error");
    }
  };
  screen = { name: "chat", threadId, append, closed, reload };
  composer.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = input.value.trim();
    if (!body) return;
    input.value = "";
    const clientMessageId = uuid();
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const answer = await session.call("ChatService", "SendMessage", { threadId, clientMessageId, body });
        append(answer.message);
        return;
      } catch (failure) {
        if (failure.code === "not_found") return closed();
        if (failure.code !== "unavailable" || attempt === 2) {
          input.value = body;
          toast(describe(failure), "error");
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 500 * (attempt + 1)));
      }
    }
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });
  const menu = h("div.menu", { hidden: true },
    h("button", { "data-test": "report", onclick: () => reportDialog(other, threadId) }, "Report"),
    h("button.danger", { "data-test": "block", onclick: () => blockMember(other) }, "Block"));
  clear(app, h("div.shell.chat", {},
    h("header.bar", {},
      h("button.icon-button", { "aria-label": "Back", onclick: showMatches }, "‹"),
      avatar(other), h("h1", {}, other?.displayName || "Chat"),
      h("button.icon-button", { "aria-label": "More", "data-test": "chat-menu", onclick: () => {
        menu.hidden = !menu.hidden;
      } }, "⋯"), menu),
    list, composer));
  await reload();
  input.focus();
}

async function blockMember(profile) {
  if (!profile || !confirm(`Block ${profile.displayName}? You will disappear from each other everywhere.`)) return;
  try {
    await session.call("MatchService", "Block", { targetUserId: profile.userId });
    toast(`${profile.displayName} is blocked.`);
    showMatches();
  } catch (failure) {
    toast(describe(failure), "error");
  }
}

function reportDialog(profile, threadId) {
  if (!profile) return;
  const dialog = h("dialog.sheet", {});
  const form = h("form", { method: "dialog" },
    h("h2", {}, `Report ${profile.displayName}`),
    h("p.muted", {}, "They will not be told. Our moderators will look at it."),
    field("Why?", h("select", { name: "reason" }, REPORT_REASONS.map(([value, label]) => h("option", { value }, label)))),
    field("What happened? (optional)", h("textarea", { name: "details", maxlength: 1000, rows: 3 })),
    h("label.check", {}, h("input", { type: "checkbox", name: "block", checked: true }), "Also block them"),
    h("div.row", {}, h("button.secondary", { value: "cancel", type: "button", onclick: () => dialog.close() }, "Cancel"),
      h("button.primary.danger", { type: "submit", "data-test": "send-report" }, "Report")));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    try {
      await session.call("MatchService", "ReportUser", { targetUserId: profile.userId, reason: data.get("reason"),
        details: data.get("details"), alsoBlock: data.get("block") === "on", idempotencyKey: uuid() });
      dialog.close();
      toast("Thanks. We have your report.");
      if (data.get("block") === "on") showMatches();
    } catch (failure) {
      toast(describe(failure), "error");
    }
  });
  dialog.append(form);
  document.body.append(dialog);
  dialog.addEventListener("close", () => dialog.remove());
  dialog.showModal();
}

// --- Profile --------------------------------------------------------------------------------------------------

async function loadCommunity() {
  if (community) return community;
  const answer = await session.call("ProfileService", "GetCommunity", {});
  community = answer.community;
  return community;
}

function attributeInput(definition) {
  const name = `attribute:${definition.key}`;
  switch (definition.attributeType) {
    case "ATTRIBUTE_TYPE_SINGLE_CHOICE":
      return h("select", { name, required: definition.required }, h("option", { value: "" }, "—"),
        (definition.choices || []).map((choice) => h("option", { value: choice.value }, choice.label || choice.value)));
    case "ATTRIBUTE_TYPE_MULTI_CHOICE":
      return h("div.checks", {}, (definition.choices || []).map((choice) =>
        h("label.check", {}, h("input", { type: "checkbox", name, value: choice.value }), choice.label || choice.value)));
    case "ATTRIBUTE_TYPE_INTEGER":
      return h("input", { name, type: "number", min: definition.minValue, max: definition.maxValue,
        required: definition.required });
    case "ATTRIBUTE_TYPE_BOOL":
      return h("label.check", {}, h("input", { type: "checkbox", name }), "Yes");
    default:
      return h("input", { name, maxlength: definition.maxLength || 200, required: definition.required });
  }
}

function attributeValues(form, definitions) {
  const values = [];
  for (const definition of definitions) {
    const name = `attribute:${definition.key}`;
    const all = new FormData(form).getAll(name).filter((value) => value !== "");
    if (!all.length) continue;
    const value = { key: definition.key };
    if (definition.attributeType === "ATTRIBUTE_TYPE_MULTI_CHOICE") value.choiceValues = { values: all };
    else if (definition.attributeType === "ATTRIBUTE_TYPE_SINGLE_CHOICE") value.choiceValue = all[0];
    else if (definition.attributeType === "ATTRIBUTE_TYPE_INTEGER") value.integerValue = String(all[0]);
    else if (definition.attributeType === "ATTRIBUTE_TYPE_BOOL") value.boolValue = true;
    else value.textValue = all[0];
    values.push(value);
  }
  return values;
}

function placeSelect() {
  return h("select", { name: "place" }, h("option", { value: "" }, "Choose a city"),
    PLACES.map(([label]) => h("option", { value: label }, label)));
}

async function currentPosition(form) {
  const place = PLACES.find(([label]) => label === new FormData(form).get("place"));
  if (place) return { latitudeDeg: place[1], longitudeDeg: place[2], accuracyM: 1000 };
  if (!navigator.geolocation) return null;
  return new Promise((resolve) => navigator.geolocation.getCurrentPosition(
    (position) => resolve({ latitudeDeg: position.coords.latitude, longitudeDeg: position.coords.longitude,
      accuracyM: Math.min(100000, Math.round(position.coords.accuracy || 0)) }),
    () => resolve(null), { timeout: 8000, maximumAge: 600000 }));
}

async function showCreateProfile() {
  screen = { name: "create" };
  clear(app, h("main.loading", {}, h("div.spinner")));
  try {
    await loadCommunity();
  } catch (failure) {
    toast(describe(failure), "error");
  }
  const settings = community?.settings || {};
  const minPhotos = settings.minPhotos || 0;
  const error = h("p.error", { role: "alert" });
  const previews = h("div.previews");
  const photos = h("input", { type: "file", name: "photos", accept: "image/jpeg,image/png,image/webp,image/heic",
    multiple: true, "data-test": "photos" });
  photos.addEventListener("change", () => clear(previews, [...photos.files].map((file) =>
    h("img", { src: URL.createObjectURL(file), alt: "" }))));
  const definitions = settings.attributeDefinitions || [];
  const form = h("form.card-form.wide", { novalidate: true },
    h("h2", {}, "Your profile"),
    h("p.muted", {}, `${community?.displayName || "Kindred"}: tell people who you are.`),
    field("Name", h("input", { name: "displayName", required: true, maxlength: 50, autocomplete: "given-name" })),
    field("Birth date", h("input", { name: "birthDate", type: "date", required: true, "data-test": "birth-date" })),
    settings.genderMatching ? [
      field("I am", h("select", { name: "gender" }, h("option", { value: "" }, "—"),
        GENDERS.map(([value, label]) => h("option", { value }, label)))),
      field("Show me", h("div.checks", {}, GENDERS.map(([value, label]) =>
        h("label.check", {}, h("input", { type: "checkbox", name: "interestedIn", value }), label))))] : null,
    field("About me", h("textarea", { name: "bio", maxlength: 500, rows: 3 })),
    field("Interests", h("input", { name: "interests", placeholder: "climbing, jazz, coffee" }), "Up to 10, comma-separated."),
    definitions.map((definition) => field(definition.label || definition.key, attributeInput(definition))),
    field(minPhotos ? `Photos (at least ${minPhotos})` : "Photos", photos), previews,
    field("Where are you?", placeSelect(), "Or leave it and allow your browser's location. Only a coarse area is kept."),
    error,
    h("button.primary", { type: "submit", "data-test": "save-profile" }, "Save and start"),
    h("button.link", { type: "button", onclick: signOut }, "Sign out"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const [year, month, day] = String(data.get("birthDate") || "").split("-").map(Number);
    error.textContent = "";
    if (!data.get("displayName") || !year) {
      error.textContent = "Your name and birth date are needed.";
      return;
    }
    if (photos.files.length < minPhotos) {
      error.textContent = `Add at least ${minPhotos} photo${minPhotos > 1 ? "s" : ""}.`;
      return;
    }
    const done = busy(form.querySelector("[type=submit]"), "Saving…");
    try {
      const fields = {
        displayName: data.get("displayName"), birthDate: { year, month, day }, bio: data.get("bio") || "",
        interests: String(data.get("interests") || "").split(",").map((word) => word.trim().toLowerCase())
          .filter(Boolean).slice(0, 10),
        attributes: attributeValues(form, definitions),
      };
      if (data.get("gender")) fields.gender = data.get("gender");
      if (data.getAll("interestedIn").length) fields.interestedIn = data.getAll("interestedIn");
      const key = sessionStorage.getItem("kindred.createKey") || uuid();
      sessionStorage.setItem("kindred.createKey", key);
      const created = await session.call("ProfileService", "CreateProfile", { fields, idempotencyKey: key });
      me = created.profile;
      const files = [...photos.files];
      for (const [index, file] of files.entries()) {
        form.querySelector("[type=submit]").textContent = `Uploading photo ${index + 1} of ${files.length}…`;
        await uploadPhoto(session, file, index);
      }
      const location = await currentPosition(form);
      if (location) await session.call("ProfileService", "UpdateLocation", { location });
      sessionStorage.removeItem("kindred.createKey");
      enterApp();
    } catch (failure) {
      error.textContent = describe(failure);
      done();
    }
  });
  clear(app, h("main.auth", {}, form));
}

async function signOut() {
  live?.stop();
  live = null;
  deck = { cards: [], next: "", loaded: false };
  community = null;
  me = null;
  sessionStorage.removeItem("kindred.resume");
  sessionStorage.removeItem("kindred.createKey");
  await session.signOut();
  showAuth("signin");
}

async function showMe() {
  screen = { name: "me" };
  const content = h("div.me", {}, h("div.spinner"));
  layout("me", "Profile", content, h("button.link", { "data-test": "sign-out", onclick: signOut }, "Sign out"));
  let profile;
  try {
    profile = (await session.call("ProfileService", "GetMyProfile", {})).profile;
  } catch (failure) {
    if (failure.reason === "PROFILE_NOT_FOUND" || failure.code === "not_found") return showCreateProfile();
    clear(content, empty("⚠", describe(failure)));
    return;
  }
  me = profile;
  const card = { ...profile.fields, userId: profile.userId, ageYears: profile.ageYears, photos: profile.photos };
  const add = h("input", { type: "file", accept: "image/*", hidden: true });
  add.addEventListener("change", async () => {
    try {
      for (const file of add.files) await uploadPhoto(session, file, 1000);
      toast("Photo added.");
    } catch (failure) {
      toast(describe(failure), "error");
    }
    showMe();
  });
  const place = placeSelect();
  clear(content,
    profile.eligible ? null : h("p.notice", {}, "Not shown to others yet. Missing: ",
      (profile.missingRequirements || []).join(", ") || "nothing", "."),
    h("div.preview", {}, profileCard(card)),
    h("section", {}, h("h3", {}, "Photos"),
      h("div.photo-grid", {}, (profile.photos || []).map((photo) => h("div.tile", {},
        h("img", { src: photoUrl(photo, "PHOTO_VARIANT_THUMBNAIL"), alt: "" }),
        h("button", { "aria-label": "Delete photo", onclick: async () => {
          try {
            await session.call("ProfileService", "DeletePhoto", { photoId: photo.photoId });
          } catch (failure) {
            toast(describe(failure), "error");
          }
          showMe();
        } }, "✕"))),
      (profile.photos || []).length < (community?.settings?.maxPhotos || 9)
        ? h("button.tile.add", { onclick: () => add.click() }, "+") : null), add),
    h("section", {}, h("h3", {}, "Location"),
      h("p.muted", {}, profile.locationSet ? "Set. Only a coarse area is kept; others see whole kilometres."
        : "Not set yet: set it to see people near you."),
      h("form.row", { onsubmit: async (event) => {
        event.preventDefault();
        const location = await currentPosition(event.target);
        if (!location) return toast("Choose a city or allow location access.", "error");
        try {
          await session.call("ProfileService", "UpdateLocation", { location });
          toast("Location updated.");
          showMe();
        } catch (failure) {
          toast(describe(failure), "error");
        }
      } }, place, h("button.secondary", { type: "submit" }, "Update"))));
}

boot();
