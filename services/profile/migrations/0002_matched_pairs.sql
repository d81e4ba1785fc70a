-- Matched pairs, from match's MatchCreated / MatchEnded events: a matched member's card stays visible to their
-- match even when it is not eligible for decks (paused, or below the photo minimum), as the contract says.
-- An ended match leaves a tombstone that names nobody (ended, no user ids), so that a MatchCreated delivered
-- after its MatchEnded (they may travel in different partitions) cannot bring the pair back, and so that a
-- MatchEnded arriving after a member's erasure stores nothing about them. Live pairs are erased with either member.
CREATE TABLE matched_pairs (
    match_id text PRIMARY KEY,
    user_a   text,
    user_b   text,
    ended    boolean NOT NULL DEFAULT false,
    CHECK (ended AND user_a IS NULL AND user_b IS NULL
           OR NOT ended AND user_a IS NOT NULL AND user_b IS NOT NULL AND user_a < user_b)
);
CREATE INDEX matched_pairs_a ON matched_pairs (user_a, user_b) WHERE NOT ended;
CREATE INDEX matched_pairs_b ON matched_pairs (user_b, user_a) WHERE NOT ended;
