package io.gpusched.rocm;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;

/**
 * Checks the KFD tree that ROCm SMI will read before {@code rsmi_init} is called in this process. librocm_smi 5.2.3
 * reads {@code nodes/}, and for every all-digit entry in it {@code properties}, {@code gpu_id}, {@code name},
 * {@code io_links/} and each {@code io_links/<n>/properties}; probed in child processes over removed, emptied,
 * truncated and garbled files and directories of captured trees ({@code KfdMutationTest}), it kills its process on
 * exactly two shapes, which are refused here:
 * <ul>
 *   <li>an all-digit entry of {@code nodes/} (a node directory, or a plain file) without an {@code io_links}
 *       directory: {@code assert(io_link_dir != nullptr)} in {@code DiscoverLinks}, SIGABRT;</li>
 *   <li>a node's {@code properties} or an io_link's {@code properties} that is not empty but holds only blank lines:
 *       the library pops every line and reads {@code back()} of the empty vector, SIGSEGV (or, by luck, not).</li>
 * </ul>
 * Everything else (garbage lines, missing {@code gpu_id}, huge numbers, missing files) it answers with a status. An
 * absent tree is fine (rsmi_init then fails cleanly with 8). Shapes outside the KFD tree, and other library versions,
 * are left to the child-process probe ({@link RocmSmiProbe}).
 */
final class KfdSanity {
    private KfdSanity() {
    }

    /** @return why the tree would make ROCm SMI kill this process, or empty when it is absent or safe */
    static Optional<String> problem(Path sysfsRoot) {
        Path nodes = sysfsRoot.resolve("class/kfd/kfd/topology/nodes");
        if (!Files.isDirectory(nodes)) {
            return Optional.empty();
        }
        List<Path> entries;
        try (Stream<Path> s = Files.list(nodes)) {
            entries = s.sorted().toList();
        } catch (IOException | UncheckedIOException e) {
            return Optional.of("cannot list " + nodes + " (" + e.getMessage() + "); ROCm SMI is not called on it");
        }
        for (Path node : entries) {
            String name = node.getFileName().toString();
            if (!allDigits(name)) {
                continue;
            }
            Path links = node.resolve("io_links");
            if (!Files.isDirectory(links)) {
                return Optional.of("KFD node " + name + " has no io_links directory (" + links + "); librocm_smi 5.x"
                        + " asserts on it (SIGABRT), so it is not called");
            }
            Optional<String> blank = blankOnly(node.resolve("properties"));
            if (blank.isPresent()) {
                return blank;
            }
            List<Path> linkDirs;
            try (Stream<Path> s = Files.list(links)) {
                linkDirs = s.sorted().toList();
            } catch (IOException | UncheckedIOException e) {
                return Optional.of("cannot list " + links + " (" + e.getMessage() + "); ROCm SMI is not called on it");
            }
            for (Path l : linkDirs) {
                if (allDigits(l.getFileName().toString())) {
                    blank = blankOnly(l.resolve("properties"));
                    if (blank.isPresent()) {
                        return blank;
                    }
                }
            }
        }
        return Optional.empty();
    }

    /** The library's {@code is_number}: not empty, every character an ASCII digit. */
    static boolean allDigits(String s) {
        if (s.isEmpty()) {
            return false;
        }
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) < '0' || s.charAt(i) > '9') {
                return false;
            }
        }
        return true;
    }

    /** @return a cause when {@code file} is a regular file, not empty, of C whitespace only (" \t\n\v\f\r") */
    private static Optional<String> blankOnly(Path file) {
        if (!Files.isRegularFile(file)) {
            return Optional.empty();
        }
        byte[] b;
        try {
            if (Files.size(file) > KfdTopology.MAX_ATTRIBUTE_BYTES) {
                return Optional.of(file + ": larger than " + KfdTopology.MAX_ATTRIBUTE_BYTES
                        + " bytes, not a sysfs attribute");
            }
            try (InputStream in = Files.newInputStream(file)) {
                b = in.readNBytes(KfdTopology.MAX_ATTRIBUTE_BYTES + 1);
            }
        } catch (IOException | UncheckedIOException e) {
            return Optional.empty();
        }
        if (b.length == 0) {
            return Optional.empty();
        }
        for (byte c : b) {
            if (c != ' ' && c != '\t' && c != '\n' && c != 0x0B && c != '\f' && c != '\r') {
                return Optional.empty();
            }
        }
        return Optional.of(file + " holds only blank lines; librocm_smi 5.x reads past its empty line list on it"
                + " (SIGSEGV), so it is not called");
    }

    /** @return true when no trace of amdgpu is present: no module, no /dev/kfd, no DRM class */
    static boolean noDriverAtAll(Path sysfsRoot, Path devRoot) {
        return !Files.exists(sysfsRoot.resolve("module/amdgpu")) && !Files.exists(devRoot.resolve("kfd"))
                && !Files.exists(sysfsRoot.resolve("class/drm"));
    }

    /** @return a sentence on the amdgpu driver's state, for causes */
    static String driverState(Path sysfsRoot, Path devRoot) {
        Path init = sysfsRoot.resolve("module/amdgpu/initstate");
        try {
            if (!Files.exists(init)) {
                return "amdgpu is not loaded (" + init + " is absent)";
            }
            String s = Files.readString(init).trim();
            if (!s.equals("live")) {
                return "amdgpu initstate is \"" + s + "\", not \"live\"";
            }
        } catch (IOException e) {
            return "cannot read " + init;
        }
        return Files.exists(devRoot.resolve("kfd")) ? "amdgpu is live" : "amdgpu is live but " + devRoot.resolve("kfd")
                + " is absent";
    }
}
