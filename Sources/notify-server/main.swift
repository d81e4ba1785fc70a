import KindredNotify
import KindredOTel
import KindredServiceKit

await ServerCommand<NotifyServerDefinition>.runWithTracing()
