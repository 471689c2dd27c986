/// The version of tiler, as `tiler --version` prints it and manifests record it.
public enum TilerVersion {
    public static let current = "0.1.0"
}
