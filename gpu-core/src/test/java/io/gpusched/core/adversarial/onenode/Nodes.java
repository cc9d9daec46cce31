package io.gpusched.core.adversarial.onenode;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** Inventories and schedulers for the one-node attacks, built from the public API only. */
final class Nodes {
    private Nodes() {
    }

    /** A "real" node: a simulated inventory's devices under a backend name that is not simulated. */
    static GpuInventory real(GpuInventory sim, String backend) {
        return new GpuInventory() {
            @Override
            public String backend() {
                return backend;
            }

            @Override
            public List<GpuDevice> devices() {
                return sim.devices();
            }

            @Override
            public GpuTopology topology() {
                return sim.topology();
            }

            @Override
            public GpuSample sample() {
                return sim.sample();
            }

            @Override
            public void close() {
                sim.close();
            }
        };
    }

    /**
     * A simulated node named like {@code profile} holding the profile's devices picked by {@code order} (the profile's
     * indices), re-indexed 0.. in that order: the same GPUs (UUIDs) enumerated differently, or some of them gone.
     */
    static SimulatedGpuInventory reindexed(String profile, int... order) {
        List<GpuDevice> all = GpuInventories.simulated(profile).devices();
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder(profile);
        for (int i = 0; i < order.length; i++) {
            b.device(all.get(order[i]).toBuilder().index(i).minor(i).build());
        }
        return b.build();
    }

    /** A simulated node with fresh UUIDs {@code prefix-i} for {@code n} GPUs and those of {@code keep} of the profile. */
    static SimulatedGpuInventory mixed(String profile, String prefix, int n, int... keep) {
        List<GpuDevice> all = GpuInventories.simulated(profile).devices();
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder(profile);
        int i = 0;
        for (int k : keep) {
            b.device(all.get(k).toBuilder().index(i).minor(i).build());
            i++;
        }
        for (int j = 0; j < n; j++, i++) {
            b.device(all.get(0).toBuilder().index(i).minor(i)
                    .uuid(String.format("GPU-%08x-0000-0000-0000-%012d", prefix.hashCode(), j)).build());
        }
        return b.build();
    }

    static GpuScheduler open(GpuInventory inv, Path dir) {
        return GpuScheduler.builder().inventory(inv).stateDir(dir).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
    }

    static GpuScheduler inMemory(GpuInventory inv) {
        return GpuScheduler.builder().inventory(inv).auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    /** Starts {@code main} of a test class in a child JVM on this test class path. */
    static Process child(List<String> jvmArgs, Class<?> main, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-Xshare:auto"));
        cmd.addAll(jvmArgs);
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), main.getName()));
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }
}
