// KindredServiceKit: what every Kindred service shares above the gRPC runtime and the database wrapper.
//
// - Events (`Events/`): `Outbox` (the producer appends in its own transaction), `OutboxRelay` (delivers
//   the outbox to each consumer's DeliverEvents in order per partition), `EventInbox` (the consumer side:
//   effect and event id committed together). The protocol is the one written in
//   proto/kindred/common/v1/events.proto.
// - Service identity: `ServiceTokenSource` (a client's service token, refreshed before expiry) and
//   `ServiceAccess` (the one check "only service X may call this RPC").
// - Paging: `PageToken`, signed and scoped page tokens.
//
// This is a module of its own rather than part of KindredGRPCServices because the `kindred` CLI depends on
// KindredGRPCServices and must not pull in libpq (KindredPostgres) with it.
