-- Members whose account was deleted: the id and the time only, nothing else of them. Events from different
-- producers are not ordered, so a MatchCreated, MessageSent or like naming a member may arrive after auth's
-- AccountDeleted; the inbox drops such an event instead of storing a row about someone who is gone. A row is
-- purged once it is older than the inbox's retention of event ids: a producer retries an event for less long.
CREATE TABLE deleted_members (
    user_id     uuid PRIMARY KEY,
    deleted_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX deleted_members_deleted_at ON deleted_members (deleted_at);
