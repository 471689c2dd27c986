/// The bytes HTTP's syntax is made of.
enum ASCII {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let sp: UInt8 = 0x20
    static let ht: UInt8 = 0x09
    static let colon: UInt8 = 0x3A
    static let slash: UInt8 = 0x2F
}
