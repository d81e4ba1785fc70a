-- The blocks notify applied (match's UserBlocked and UserUnblocked): who blocked whom, whether the block stands, and
-- the sequence of the event that said so in the blocker's partition. Events are ordered only within one member's
-- partition, so a like, a match or a message about the pair (another member's partition) may arrive after the block:
-- whatever would be queued or counted about a pair blocked either way is checked against this table. A block and its
-- unblock are in the blocker's partition; an event older than the row's (a lower sequence) changes nothing, so an
-- old block delivered again cannot win over a newer unblock. An unblocked row stays for the inbox's retention of
-- event ids (a producer retries an event for less long), then goes; every row naming a member goes with the account.
CREATE TABLE blocks (
    blocker_id  uuid NOT NULL,
    blocked_id  uuid NOT NULL,
    active      boolean NOT NULL,
    sequence    bigint NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (blocker_id, blocked_id)
);
CREATE INDEX blocks_blocked ON blocks (blocked_id);
CREATE INDEX blocks_lifted ON blocks (changed_at) WHERE NOT active;
