import KindredGateway
import KindredOTel
import KindredServiceKit

// `gateway-server serve | migrate | healthcheck`: settings from `KINDRED_GATEWAY_*` (services/gateway/README.md);
// the work happens in `KindredGateway.GatewayServer`.
await ServerCommand<GatewayServerDefinition>.runWithTracing()
