-- Pairs whose match ended (match's MatchEnded: either side unmatched, or a block ended it). Neither sees the
-- other's card again (VisibilityPolicy: unmatched), exactly as after a block, so a block cannot be told from an
-- unmatch. A row is stored only while both members have a profile (a MatchEnded arriving after a member's erasure
-- stores nothing about them) and is erased with either member.
CREATE TABLE ended_pairs (
    user_a text NOT NULL,
    user_b text NOT NULL,
    PRIMARY KEY (user_a, user_b),
    CHECK (user_a < user_b)
);
CREATE INDEX ended_pairs_b ON ended_pairs (user_b, user_a);
