// KindredServiceKit: what every Kindred service shares above the gRPC runtime and the database wrapper.
//
// - Events (`Events/`): `Outbox` (the producer appends in its own transaction), `OutboxRelay` (delivers
//   the outbox to each consumer's DeliverEvents in order per partition), `EventInbox` (the consumer side:
//   effect and event id committed together). The protocol is the one written in
//   proto/kindred/common/v1/events.proto.
// - Callers: `ServiceAccess`, the one caller check of every service (a member, an admin, a service, the viewer
//   of a read), with one answer per situation. Service identity: `ServiceTokenSource` (a client's service
//   token, refreshed before expiry).
// - Paging: `PageToken`, signed and scoped page tokens.
//
// This is a module of its own rather than part of KindredGRPCServices because the `kindred` CLI depends on
// KindredGRPCServices and must not pull in libpq (KindredPostgres) with it.
