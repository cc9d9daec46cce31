package io.gpusched.rocm;

import io.gpusched.core.GpuDevice;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * Per-process VRAM of AMD GPUs from the KFD's sysfs: {@code /sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>} holds the
 * bytes of VRAM process {@code pid} holds on the GPU whose KFD {@code gpu_id} it names (kernel 5.8 and later; ROCm SMI
 * reads the same files). What cannot be read is not guessed: no {@code proc} directory (an older kernel, or a sysfs
 * that does not show it) gives empty. Reads are bounded: at most {@value #MAX_PROCESSES} processes, 64 bytes a file,
 * only regular files (no links), pids of digits only.
 */
final class KfdProcesses {
    /** Why per-process utilization is not measured on AMD GPUs. */
    static final String UTILIZATION_NOT_MEASURED = "AMD: neither ROCm SMI nor the KFD gives per-process busy time"
            + " (the KFD's cu_occupancy counts compute units a process occupies, not time)";
    /** Most processes read. */
    static final int MAX_PROCESSES = 65_536;

    private KfdProcesses() {
    }

    /** @return the KFD {@code gpu_id} of a device (its topology node's {@code gpu_id}), where readable */
    static OptionalLong gpuId(Path sysfsRoot, GpuDevice d) {
        String node = d.properties().get("kfd.node");
        if (node == null || !node.matches("[0-9]{1,5}")) {
            return OptionalLong.empty();
        }
        return number(sysfsRoot.resolve("class/kfd/kfd/topology/nodes").resolve(node).resolve("gpu_id"));
    }

    /**
     * @return per pid, the VRAM bytes it holds on the GPU {@code gpuId}; empty when the KFD's {@code proc} directory
     *         is absent or unreadable
     */
    static Optional<Map<Integer, Long>> vram(Path sysfsRoot, long gpuId) {
        Path proc = sysfsRoot.resolve("class/kfd/kfd/proc");
        if (!Files.isDirectory(proc)) {
            return Optional.empty();
        }
        Map<Integer, Long> out = new LinkedHashMap<>();
        String file = "vram_" + Long.toUnsignedString(gpuId);
        int seen = 0;
        try (DirectoryStream<Path> pids = Files.newDirectoryStream(proc)) {
            for (Path p : pids) {
                if (++seen > MAX_PROCESSES) {
                    break;
                }
                String name = p.getFileName().toString();
                if (!name.matches("[1-9][0-9]{0,9}") || Long.parseLong(name) > Integer.MAX_VALUE) {
                    continue;
                }
                OptionalLong v = number(p.resolve(file));
                if (v.isPresent()) {
                    out.put(Integer.parseInt(name), v.getAsLong());
                }
            }
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
        return Optional.of(out);
    }

    /** @return the unsigned decimal a small sysfs file holds (below 2^63), where it is a regular file that holds one */
    static OptionalLong number(Path f) {
        if (!Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS)) {
            return OptionalLong.empty();
        }
        byte[] b;
        try (InputStream in = Files.newInputStream(f, LinkOption.NOFOLLOW_LINKS)) {
            b = in.readNBytes(64);
        } catch (IOException | RuntimeException e) {
            return OptionalLong.empty();
        }
        String s = new String(b, StandardCharsets.US_ASCII).trim();
        if (!s.matches("[0-9]{1,18}")) {
            return OptionalLong.empty();
        }
        return OptionalLong.of(Long.parseLong(s));
    }
}
