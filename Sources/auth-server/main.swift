import KindredAuth
import KindredOTel
import KindredServiceKit

// `auth-server serve | migrate | healthcheck | bootstrap-admin`: settings from `KINDRED_AUTH_*`
// (services/auth/README.md); the work happens in `KindredAuth.AuthServer`.
await ServerCommand<AuthServerDefinition>.runWithTracing()
