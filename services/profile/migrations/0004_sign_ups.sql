-- Communities take sign-ups unless an admin closes them (CommunitySettings.sign_up_open). Until now the flag was
-- not enforced and CreateCommunity stored it as given, so most communities hold false while taking members. Every
-- existing community is opened, as it behaved: appending field 14 (sign_up_open, varint) = true to the stored
-- protobuf settings sets it, since the last occurrence of a scalar field wins when decoding.
UPDATE communities SET settings = settings || '\x7001'::bytea;

-- auth learns from CommunityUpdated whether a community takes sign-ups (a community it has not heard of does).
-- Registered now so that events written before auth's relay consumer is configured wait for it. The events
-- already written are marked delivered to it: they predate the opening above and would close communities again.
INSERT INTO events_consumers (consumer) VALUES ('auth') ON CONFLICT DO NOTHING;
INSERT INTO events_cursors (consumer, partition_key, appended_sequence, acknowledged_sequence)
SELECT 'auth', partition_key, last_sequence, last_sequence FROM events_partitions
ON CONFLICT (consumer, partition_key) DO NOTHING;
