-- What another member sees of a profile has its own version: fields, photos and the community's rules change it,
-- a location update does not (`version` still counts every change, for the events' snapshots). A card version
-- that moved with each location update let anyone polling GetProfiles tell when a member was active. Cards keep
-- the version they showed, so a client's cache never sees one go back.
ALTER TABLE profiles ADD COLUMN card_version bigint NOT NULL DEFAULT 1;
UPDATE profiles SET card_version = version;
