-- Accounts created from an Apple ID token may have no shared address: email becomes optional (the unique
-- constraint allows any number of NULLs).
ALTER TABLE accounts ALTER COLUMN email DROP NOT NULL;
