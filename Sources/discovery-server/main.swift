import KindredDiscovery
import KindredServiceKit

await ServerCommand<DiscoveryServerDefinition>.runFromCommandLine()
