package io.gpusched.cuda;

import io.gpusched.cuda.CudaInstallation.VersionSource;
import io.gpusched.cuda.internal.CudaRuntimeProbe;
import io.gpusched.cuda.internal.VersionFiles;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.TreeSet;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Finds CUDA installations: {@code /usr/local/cuda}, {@code /usr/local/cuda-*}, {@code /opt/cuda},
 * {@code /usr/lib/cuda}, {@code CUDA_HOME}, {@code CUDA_PATH} and configured paths. A symlink is followed once and an
 * installation reached several ways is reported once, with its aliases. Unreadable files and dangling links are
 * reported as problems, never thrown.
 */
public final class CudaInstallations {

    /**
     * What a search found.
     *
     * @param installations installations, newest version first
     * @param problems      candidates that could not be used, and why
     */
    public record Discovery(List<CudaInstallation> installations, List<String> problems) {
        /** Copies the lists. */
        public Discovery {
            installations = List.copyOf(installations);
            problems = List.copyOf(problems);
        }
    }

    private static final Pattern LIB = Pattern.compile("lib([A-Za-z0-9_]+)\\.so(\\..*)?");

    private CudaInstallations() {
    }

    /** @return the installations the search finds */
    public static Discovery discover(CudaSearch search) {
        List<Path> candidates = new ArrayList<>();
        List<String> problems = new ArrayList<>();
        Path root = search.fsRoot();
        candidates.add(root.resolve("usr/local/cuda"));
        Path local = root.resolve("usr/local");
        if (Files.isDirectory(local)) {
            try (Stream<Path> s = Files.list(local)) {
                s.filter(p -> p.getFileName().toString().startsWith("cuda-")).sorted().forEach(candidates::add);
            } catch (IOException e) {
                problems.add("cannot list " + local + ": " + e.getMessage());
            }
        }
        candidates.add(root.resolve("opt/cuda"));
        candidates.add(root.resolve("usr/lib/cuda"));
        for (String var : List.of("CUDA_HOME", "CUDA_PATH")) {
            String v = search.environment().get(var);
            if (v != null && !v.isBlank()) {
                candidates.add(Path.of(v));
            }
        }
        candidates.addAll(search.extraPaths());

        Map<Path, List<Path>> byReal = new LinkedHashMap<>();
        for (Path c : candidates) {
            Path abs = c.toAbsolutePath().normalize();
            if (Files.isSymbolicLink(abs)) {
                Path target;
                try {
                    target = abs.resolveSibling(Files.readSymbolicLink(abs)).normalize();
                } catch (IOException e) {
                    problems.add("cannot read link " + abs + ": " + e.getMessage());
                    continue;
                }
                if (!Files.exists(target)) {
                    problems.add("dangling symlink " + abs + " -> " + target);
                    continue;
                }
                byReal.computeIfAbsent(real(target), k -> new ArrayList<>()).add(abs);
            } else if (Files.isDirectory(abs, LinkOption.NOFOLLOW_LINKS)) {
                byReal.computeIfAbsent(real(abs), k -> new ArrayList<>());
            } else if (search.extraPaths().contains(c) || isEnv(search, c)) {
                problems.add(abs + " (configured) does not exist");
            }
        }
        List<CudaInstallation> out = new ArrayList<>();
        for (Map.Entry<Path, List<Path>> e : byReal.entrySet()) {
            List<Path> aliases = e.getValue().stream().filter(a -> !a.equals(e.getKey())).distinct().toList();
            read(e.getKey(), aliases, search.probeRuntime()).ifPresentOrElse(out::add,
                    () -> problems.add(e.getKey() + " does not look like a CUDA installation (no version file,"
                            + " cuda.h, libcudart or nvcc)"));
        }
        out.sort(Comparator.comparing((CudaInstallation i) -> i.version().orElse(new CudaVersion(1, 0, 0)))
                .reversed().thenComparing(i -> i.root().toString()));
        return new Discovery(out, problems);
    }

    private static boolean isEnv(CudaSearch s, Path c) {
        return c.toString().equals(s.environment().get("CUDA_HOME"))
                || c.toString().equals(s.environment().get("CUDA_PATH"));
    }

    private static Path real(Path p) {
        try {
            return p.toRealPath();
        } catch (IOException e) {
            return p.toAbsolutePath().normalize();
        }
    }

    /** Reads one installation root; empty when nothing CUDA-like is there. */
    static Optional<CudaInstallation> read(Path root, List<Path> aliases, boolean probe) {
        List<String> problems = new ArrayList<>();
        boolean pip = false;
        Optional<Path> libDir = firstDir(root.resolve("lib64"), root.resolve("lib"),
                root.resolve("targets/x86_64-linux/lib"), root.resolve("targets/sbsa-linux/lib"));
        if (libDir.isEmpty() || !hasCudart(libDir.get())) {
            Optional<Path> wheel = firstDir(root.resolve("cu13/lib"), root.resolve("cuda_runtime/lib"));
            if (wheel.isPresent() && hasCudart(wheel.get())) {
                libDir = wheel;
                pip = true;
            }
        }
        Optional<Path> runtime = libDir.flatMap(CudaInstallations::cudart);
        Optional<Path> nvcc = Optional.of(root.resolve("bin/nvcc")).filter(Files::isExecutable)
                .or(() -> Optional.of(root.resolve("cuda_nvcc/bin/nvcc")).filter(Files::isExecutable));

        Optional<CudaVersion> version = read(root.resolve("version.json"), VersionFiles::fromVersionJson, problems);
        VersionSource source = version.isPresent() ? VersionSource.VERSION_JSON : null;
        if (version.isEmpty()) {
            version = read(root.resolve("version.txt"), VersionFiles::fromVersionTxt, problems);
            source = version.isPresent() ? VersionSource.VERSION_TXT : null;
        }
        if (version.isEmpty()) {
            version = read(firstFile(root.resolve("include/cuda.h"),
                    root.resolve("targets/x86_64-linux/include/cuda.h"),
                    root.resolve("cuda_runtime/include/cuda.h"), root.resolve("cu13/include/cuda.h")),
                    VersionFiles::fromCudaHeader, problems);
            source = version.isPresent() ? VersionSource.CUDA_H : null;
        }
        Optional<CudaVersion> soname = libDir.flatMap(d -> sonameVersion(d, problems));
        if (version.isEmpty() && soname.isPresent() && soname.get().minor() > 0) {
            version = soname;
            source = VersionSource.LIBCUDART_SONAME;
        }
        if (version.isEmpty()) {
            version = pipVersion(root, problems);
            source = version.isPresent() ? VersionSource.PIP_METADATA : null;
        }
        if (version.isEmpty() && soname.isPresent()) {
            version = soname;
            source = VersionSource.LIBCUDART_SONAME;
            problems.add("only the major version is known (from " + runtime.map(Path::getFileName).orElse(null)
                    + "); minor read as 0");
        }
        if (version.isEmpty() && runtime.isEmpty() && nvcc.isEmpty()) {
            return Optional.empty();
        }
        Optional<CudaVersion> api = Optional.empty();
        if (probe && runtime.isPresent()) {
            OptionalInt v = CudaRuntimeProbe.runtimeVersion(runtime.get());
            if (v.isPresent()) {
                api = Optional.of(CudaVersion.fromApiInt(v.getAsInt()));
            } else {
                problems.add("cudaRuntimeGetVersion of " + runtime.get() + " gave no answer");
            }
        }
        Optional<Path> compat = Optional.of(root.resolve("compat")).filter(CudaInstallations::hasLibcuda);
        return Optional.of(new CudaInstallation(root, aliases, version, Optional.ofNullable(source), api, libDir,
                runtime, nvcc, libDir.map(CudaInstallations::libraries).orElse(List.of()), compat, pip, problems));
    }

    private static Optional<Path> firstDir(Path... dirs) {
        for (Path d : dirs) {
            if (Files.isDirectory(d)) {
                return Optional.of(d);
            }
        }
        return Optional.empty();
    }

    private static Path firstFile(Path... files) {
        for (Path f : files) {
            if (Files.isRegularFile(f)) {
                return f;
            }
        }
        return files[0];
    }

    private static boolean hasCudart(Path dir) {
        return cudart(dir).isPresent();
    }

    private static boolean hasLibcuda(Path dir) {
        if (!Files.isDirectory(dir)) {
            return false;
        }
        try (Stream<Path> s = Files.list(dir)) {
            return s.anyMatch(p -> p.getFileName().toString().startsWith("libcuda.so") && Files.isRegularFile(p));
        } catch (IOException | UncheckedIOException e) {
            return false;
        }
    }

    /**
     * @return the shortest {@code libcudart.so.N*} name (the soname) that is a regular file once links are followed:
     *         dangling links and directories of that name are skipped (a job cannot load them)
     */
    private static Optional<Path> cudart(Path dir) {
        try (Stream<Path> s = Files.list(dir)) {
            return s.filter(p -> VersionFiles.isCudartName(p.getFileName().toString())).filter(Files::isRegularFile)
                    .min(Comparator.comparing((Path p) -> p.getFileName().toString().length()));
        } catch (IOException | UncheckedIOException e) {
            return Optional.empty();
        }
    }

    private static Optional<CudaVersion> sonameVersion(Path dir, List<String> problems) {
        List<CudaVersion> found = new ArrayList<>();
        try (Stream<Path> s = Files.list(dir)) {
            s.forEach(p -> {
                try {
                    VersionFiles.fromCudartName(p.getFileName().toString()).ifPresent(found::add);
                } catch (IllegalArgumentException e) {
                    problems.add(p + ": " + firstLine(e.getMessage()));
                }
            });
        } catch (IOException | UncheckedIOException e) {
            return Optional.empty();
        }
        return found.stream().max(Comparator.naturalOrder());
    }

    /** pip layouts: {@code dist-info/} inside the root (CUDA 13 wheels laid out as a toolkit) or beside it. */
    private static Optional<CudaVersion> pipVersion(Path root, List<String> problems) {
        for (Path dir : new Path[]{root.resolve("dist-info"), root, root.getParent()}) {
            if (dir == null || !Files.isDirectory(dir)) {
                continue;
            }
            List<CudaVersion> found = new ArrayList<>();
            try (Stream<Path> s = Files.list(dir)) {
                s.forEach(p -> {
                    try {
                        VersionFiles.fromPipDistInfo(p.getFileName().toString()).ifPresent(found::add);
                    } catch (IllegalArgumentException e) {
                        problems.add(p + ": " + firstLine(e.getMessage()));
                    }
                });
            } catch (IOException | UncheckedIOException e) {
                problems.add("cannot read pip metadata in " + dir + ": " + firstLine(e.getMessage()));
            }
            if (!found.isEmpty()) {
                return found.stream().max(Comparator.naturalOrder());
            }
        }
        return Optional.empty();
    }

    /** Reads a version file (bounded, lenient UTF-8); a problem, never an exception, when it is bad. */
    private static Optional<CudaVersion> read(Path file, Function<String, Optional<CudaVersion>> parser,
            List<String> problems) {
        if (!Files.isRegularFile(file)) {
            return Optional.empty();
        }
        try {
            if (Files.size(file) > VersionFiles.MAX_TEXT) {
                problems.add(file + " is " + Files.size(file) + " bytes, too large for a version file");
                return Optional.empty();
            }
            String text = new String(Files.readAllBytes(file), StandardCharsets.UTF_8);
            Optional<CudaVersion> v = parser.apply(text);
            if (v.isEmpty()) {
                problems.add(file + " has no version in the expected form");
            }
            return v;
        } catch (IOException | UncheckedIOException | IllegalArgumentException e) {
            problems.add(file + " is unreadable: " + firstLine(e.getMessage()));
            return Optional.empty();
        }
    }

    private static List<String> libraries(Path dir) {
        TreeSet<String> names = new TreeSet<>();
        try (Stream<Path> s = Files.list(dir)) {
            s.map(p -> LIB.matcher(p.getFileName().toString())).filter(Matcher::matches)
                    .forEach(m -> names.add(m.group(1)));
        } catch (IOException e) {
            return List.of();
        }
        return List.copyOf(names);
    }

    private static String firstLine(String s) {
        if (s == null) {
            return "";
        }
        int nl = s.indexOf('\n');
        return nl < 0 ? s : s.substring(0, nl);
    }

    /** @return a one-line summary of where the version came from, for reports */
    static String describe(CudaInstallation i) {
        return i.version().map(v -> v + " (from " + i.versionSource().map(VersionSource::label).orElse("?") + ")")
                .orElse("unknown version");
    }
}
