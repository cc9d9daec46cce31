package io.gpusched.core;

import io.gpusched.core.host.JobCgroups;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The allocations a node ledger records, read once without taking the node's lock and without writing anything: for
 * processes that only need to learn which GPUs are whose, such as a YARN container running as another user than the
 * NodeManager that wrote the ledger. A reader needs read access only (the state directory readable and searchable,
 * the {@code ledger} file readable); it makes the same checks of the directory and file a writer makes except that it
 * may be another user (see {@link LedgerException.Kind#UNREADABLE} and {@code INSECURE_PERMISSIONS}).
 *
 * <pre>{@code
 * NodeLedgerView v = NodeLedgerView.read(Path.of("/var/lib/gpusched"), inventory);
 * v.allocations().forEach(a -> System.out.println(a.id() + " " + a.deviceIndices()));
 * }</pre>
 *
 * <p>The view is what the ledger held when it was read: a record a writer was appending meanwhile (an incomplete last
 * line) is not in it. It agrees with what the next writer does with leases: an allocation whose lease has ended and
 * ends it (made by a process with {@code gpu.leases.release_on_expiry}) is not listed, unless its job cgroup still has
 * processes; an expired lease without it stays listed (held, {@code expiresAt} in the past) until released or renewed.
 * Nothing is written: a dead holder's allocation stays listed until a writer records its release.
 */
public final class NodeLedgerView {
    private final Path file;
    private final long sequence;
    private final List<Allocation> allocations;
    private final List<DeviceState> devices;
    private final List<String> warnings;

    private NodeLedgerView(Path file, long sequence, List<Allocation> allocations, List<DeviceState> devices,
            List<String> warnings) {
        this.file = file;
        this.sequence = sequence;
        this.allocations = List.copyOf(allocations);
        this.devices = List.copyOf(devices);
        this.warnings = List.copyOf(warnings);
    }

    /**
     * Reads the node ledger in {@code stateDir} (used as it is; see {@link io.gpusched.core.host.StateDirectory} for
     * the rule that finds a node's directory) and checks that it describes {@code inventory}'s node.
     *
     * @param stateDir  the state directory
     * @param inventory the node's inventory: the ledger names GPUs by UUID, the allocations carry its devices
     * @return the live allocations as the ledger records them
     * @throws LedgerException {@code UNREADABLE} when this process's user cannot read the directory or the ledger, or
     *                         there is none (naming the path and the modes that would work); {@code
     *                         INSECURE_PERMISSIONS}, {@code CORRUPT}, {@code NEWER_FORMAT}, {@code NODE_MISMATCH} as
     *                         for a scheduler over the directory
     */
    public static NodeLedgerView read(Path stateDir, GpuInventory inventory) {
        return read(stateDir, inventory, Clock.systemUTC());
    }

    /**
     * As {@link #read(Path, GpuInventory)}, deciding which leases have ended on {@code clock} (the node's writers'
     * clock: the system clock, or a test's).
     */
    public static NodeLedgerView read(Path stateDir, GpuInventory inventory, Clock clock) {
        Objects.requireNonNull(stateDir, "stateDir");
        Objects.requireNonNull(inventory, "inventory");
        List<DeviceState> idle = new ArrayList<>();
        for (GpuDevice d : inventory.devices()) {
            GpuHealth h;
            try {
                h = inventory.health(d);
            } catch (RuntimeException e) {
                h = GpuHealth.lost("health could not be read: " + e.getMessage());
            }
            idle.add(DeviceState.idle(d, h));
        }
        List<String> warnings = new ArrayList<>();
        NodeState s = LedgerFile.read(stateDir, new NodeState(idle), warnings);
        NodeIdentity.verify(stateDir.toAbsolutePath().normalize(), inventory);
        Instant now = clock.instant();
        for (Allocation a : List.copyOf(s.live.values())) {
            // what the next writer does: a lease that ends its allocation is over (unless its job still runs)
            if (Leases.ends(a, s, false, now)
                    && a.request().jobCgroup().map(c -> !JobCgroups.populated(Path.of(c))).orElse(true)) {
                s.endInView(a.id(), now);
            }
        }
        warnings.addAll(s.problems);
        return new NodeLedgerView(stateDir.toAbsolutePath().normalize().resolve(LedgerFile.FILE), s.sequence,
                new ArrayList<>(s.live.values()), s.snapshot(), warnings);
    }

    /** @return the ledger file read */
    public Path file() {
        return file;
    }

    /** @return the sequence of the last record read (0 for a ledger without records) */
    public long sequence() {
        return sequence;
    }

    /** @return the live allocations, in the order they were made */
    public List<Allocation> allocations() {
        return allocations;
    }

    /**
     * @return the node's devices as the ledger records them: who holds each, draining and quarantined ones, and the
     *         inventory's health when the view was read; no metrics
     */
    public List<DeviceState> devices() {
        return devices;
    }

    /**
     * @return what the view could not show: an incomplete last record left unread, GPUs an allocation holds that the
     *         inventory does not have (such an allocation lists only the devices the inventory has)
     */
    public List<String> warnings() {
        return warnings;
    }

    @Override
    public String toString() {
        return "NodeLedgerView[" + file + ", sequence " + sequence + ", " + allocations.size() + " allocations]";
    }
}
