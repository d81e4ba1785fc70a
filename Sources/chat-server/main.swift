import KindredChat
import KindredOTel
import KindredServiceKit

await ServerCommand<ChatServerDefinition>.runWithTracing()
