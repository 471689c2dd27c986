import Foundation
import TilerHTTP

/// A thread-safe least-recently-used cache of prepared responses, bounded by the bytes
/// of their bodies.
public final class ResponseCache<Key: Hashable & Sendable>: @unchecked Sendable {
    private final class Node {
        let key: Key
        let value: PreparedResponse
        let cost: Int
        var newer: Node?
        weak var older: Node?
        init(key: Key, value: PreparedResponse, cost: Int) {
            self.key = key
            self.value = value
            self.cost = cost
        }
    }

    /// The most bytes held at once.
    public let capacity: Int
    private let lock = NSLock()
    private var nodes: [Key: Node] = [:]
    private var newest: Node?
    private var oldest: Node?
    private var bytes = 0

    public init(capacity: Int) {
        self.capacity = capacity
    }

    /// Bytes held now.
    public var totalBytes: Int { lock.withLock { bytes } }
    /// Entries held now.
    public var count: Int { lock.withLock { nodes.count } }

    /// The cached value, marking it most recently used.
    public func value(for key: Key) -> PreparedResponse? {
        lock.lock()
        defer { lock.unlock() }
        guard let node = nodes[key] else { return nil }
        if node !== newest {
            unlink(node)
            pushNewest(node)
        }
        return node.value
    }

    /// Stores `value`, evicting the least recently used entries to stay within capacity.
    /// Values larger than the whole capacity are not stored.
    public func insert(_ value: PreparedResponse, for key: Key) {
        let cost = value.body.count + 256
        guard cost <= capacity else { return }
        lock.lock()
        defer { lock.unlock() }
        if let old = nodes.removeValue(forKey: key) {
            unlink(old)
            bytes -= old.cost
        }
        let node = Node(key: key, value: value, cost: cost)
        nodes[key] = node
        pushNewest(node)
        bytes += cost
        while bytes > capacity, let victim = oldest {
            unlink(victim)
            nodes.removeValue(forKey: victim.key)
            bytes -= victim.cost
        }
    }

    /// Drops everything.
    public func removeAll() {
        lock.withLock {
            nodes.removeAll()
            newest = nil
            oldest = nil
            bytes = 0
        }
    }

    private func unlink(_ node: Node) {
        let older = node.older, newer = node.newer
        if let older { older.newer = newer } else { oldest = newer }
        if let newer { newer.older = older } else { newest = older }
        node.older = nil
        node.newer = nil
    }

    private func pushNewest(_ node: Node) {
        node.older = newest
        node.newer = nil
        if let newest { newest.newer = node } else { oldest = node }
        newest = node
    }
}
