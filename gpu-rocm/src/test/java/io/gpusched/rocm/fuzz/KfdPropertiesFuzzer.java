package io.gpusched.rocm.fuzz;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuDevice;
import io.gpusched.rocm.KfdSysfsInventory;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * Fuzz target for the KFD topology files as {@link KfdSysfsInventory#open(Path, Clock)} reads them: a CPU node 0
 * and a node 1 whose {@code properties}, {@code gpu_id}, {@code mem_banks/0/properties} and
 * {@code io_links/0/properties} are the input's parts (separated by lines {@code ---}). Contract: an inventory, or
 * only {@link BackendUnavailableException} (no GPU node); bad lines are problems, never other exceptions; devices
 * have non-negative memory.
 */
public final class KfdPropertiesFuzzer {
    private static final Path BASE = baseDir();

    private KfdPropertiesFuzzer() {
    }

    private static Path baseDir() {
        Path shm = Path.of("/dev/shm");
        try {
            return Files.createTempDirectory(Files.isDirectory(shm) && Files.isWritable(shm) ? shm
                    : Path.of(System.getProperty("java.io.tmpdir")), "kfd-fuzz");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** One input: properties, then "---" lines separating gpu_id, mem bank 0 properties and io link 0 properties. */
    public static void fuzzerTestOneInput(byte[] input) {
        String[] parts = new String(input, StandardCharsets.UTF_8).split("\n---\n", 4);
        Path sys = BASE.resolve("sys");
        try {
            delete(sys);
            Path nodes = Files.createDirectories(sys.resolve("class/kfd/kfd/topology/nodes"));
            Path cpu = Files.createDirectories(nodes.resolve("0"));
            Files.writeString(cpu.resolve("properties"), "cpu_cores_count 64\nsimd_count 0\nlocation_id 0\n");
            Files.writeString(cpu.resolve("gpu_id"), "0\n");
            Path gpu = Files.createDirectories(nodes.resolve("1"));
            Files.writeString(gpu.resolve("properties"), parts[0]);
            Files.writeString(gpu.resolve("gpu_id"), parts.length > 1 ? parts[1] : "1001\n");
            if (parts.length > 2) {
                Files.writeString(Files.createDirectories(gpu.resolve("mem_banks/0")).resolve("properties"), parts[2]);
            }
            if (parts.length > 3) {
                Files.writeString(Files.createDirectories(gpu.resolve("io_links/0")).resolve("properties"), parts[3]);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot lay out the fixture", e);
        }
        try (KfdSysfsInventory inv = KfdSysfsInventory.open(sys, Clock.systemUTC())) {
            for (GpuDevice d : inv.devices()) {
                if (d.memory().bytes() < 0 || d.index() < 0) {
                    throw new AssertionError("device with negative memory or index: " + d);
                }
            }
            inv.topology();
            inv.sample();
        } catch (BackendUnavailableException e) {
            if (e.getMessage() == null || e.getMessage().isBlank()) {
                throw new AssertionError("BackendUnavailableException without a message", e);
            }
        }
    }

    private static void delete(Path p) throws IOException {
        if (!Files.exists(p)) {
            return;
        }
        try (Stream<Path> s = Files.walk(p)) {
            for (Path q : s.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(q);
            }
        }
    }
}
