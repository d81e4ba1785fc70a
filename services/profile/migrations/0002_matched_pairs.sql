-- Matched pairs, from match's MatchCreated / MatchEnded events: a matched member's card stays visible to their
-- match even when it is not eligible for decks (paused, or below the photo minimum), as the contract says.
-- An ended match is kept as a tombstone (ended = true) so that a MatchCreated delivered after its MatchEnded
-- (they may travel in different partitions) cannot bring the pair back. Erased with either member.
CREATE TABLE matched_pairs (
    match_id text PRIMARY KEY,
    user_a   text NOT NULL,
    user_b   text NOT NULL CHECK (user_a < user_b),
    ended    boolean NOT NULL DEFAULT false
);
CREATE INDEX matched_pairs_a ON matched_pairs (user_a, user_b);
CREATE INDEX matched_pairs_b ON matched_pairs (user_b, user_a);
