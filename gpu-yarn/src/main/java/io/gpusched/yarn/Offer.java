package io.gpusched.yarn;

import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;

/**
 * One {@code allocateDevices} call's offer: the YARN device behind each usable GPU index (known to the inventory,
 * healthy, not held by another process of the node), as a bit set over device indices, plus why the others were
 * left out. Built once per call and read by the placement cache's key without copying; not thread-safe.
 */
final class Offer {
    private final Device[] byIndex;
    private final long[] bits;
    private int size;
    private List<String> refused;

    /** @param indices one more than the largest device index of the node */
    Offer(int indices) {
        this.byIndex = new Device[indices];
        this.bits = new long[Math.max(1, (indices + 63) >>> 6)];
    }

    /** Adds a usable GPU (the last device given for an index wins, as YARN's set has one per GPU). */
    void add(int index, Device dev) {
        if (byIndex[index] == null) {
            size++;
            bits[index >>> 6] |= 1L << index;
        }
        byIndex[index] = dev;
    }

    /** Leaves a GPU out of the offer (if offered), saying why. */
    void remove(int index, String why) {
        if (index >= 0 && index < byIndex.length && byIndex[index] != null) {
            byIndex[index] = null;
            bits[index >>> 6] &= ~(1L << index);
            size--;
            refuse(why);
        }
    }

    /** Notes a device YARN offered that is not usable. */
    void refuse(String why) {
        if (refused == null) {
            refused = new ArrayList<>(2);
        }
        refused.add(why);
    }

    /** @return whether this GPU index is offered */
    boolean contains(int index) {
        return index >= 0 && index < byIndex.length && byIndex[index] != null;
    }

    /** @return the YARN device offered for this GPU index, or null */
    Device device(int index) {
        return index >= 0 && index < byIndex.length ? byIndex[index] : null;
    }

    /** @return usable GPUs offered */
    int size() {
        return size;
    }

    /** @return the offered indices as bits (bit {@code i % 64} of word {@code i / 64}); not a copy */
    long[] bits() {
        return bits;
    }

    /** @return the offered indices, ascending */
    List<Integer> indices() {
        List<Integer> out = new ArrayList<>(size);
        for (int i = 0; i < byIndex.length; i++) {
            if (byIndex[i] != null) {
                out.add(i);
            }
        }
        return out;
    }

    /** @return why devices were left out (empty if none) */
    List<String> refused() {
        return refused == null ? List.of() : refused;
    }

    @Override
    public String toString() {
        return indices() + (refused == null ? "" : " (left out: " + refused + ")");
    }
}
