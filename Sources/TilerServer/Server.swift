import TilerCore
import TilerHTTP
