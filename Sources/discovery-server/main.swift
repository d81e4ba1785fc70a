import KindredDiscovery
import KindredOTel
import KindredServiceKit

await ServerCommand<DiscoveryServerDefinition>.runWithTracing()
