import TilerCore
