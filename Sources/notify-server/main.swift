import KindredNotify
import KindredServiceKit

await ServerCommand<NotifyServerDefinition>.runFromCommandLine()
