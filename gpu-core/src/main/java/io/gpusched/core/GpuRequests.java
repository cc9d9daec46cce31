package io.gpusched.core;

import io.gpusched.core.internal.Durations;
import io.gpusched.core.internal.Printable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeSet;
import java.util.function.Supplier;

/**
 * Parsers for the request forms users already write: command-line flags ({@code --gpu=2 --gpu-memory=8GB}) and a
 * workflow's {@code resources:} map ({@code gpu_count}, {@code gpu_memory_mb}). Every error is an
 * {@link IllegalArgumentException} naming the input and what would be valid.
 */
public final class GpuRequests {

    /** Host name of a {@code --target}, kept on the request as this label. */
    public static final String TARGET_HOST_LABEL = "gpusched.io/target-host";

    private static final Map<String, String> FLAGS = new LinkedHashMap<>();

    static {
        FLAGS.put("--gpu", "GPU count");
        FLAGS.put("--gpus", "GPU count");
        FLAGS.put("--gpu-memory", "minimum memory per GPU (8GB, 4096MB, 4096 = MiB)");
        FLAGS.put("--min-cc", "minimum compute capability (8.0)");
        FLAGS.put("--vendor", "nvidia or amd");
        FLAGS.put("--model", "glob on the GPU name (*A100*)");
        FLAGS.put("--devices", "explicit GPU indices (0,2)");
        FLAGS.put("--uuids", "explicit GPU UUIDs (GPU-...,GPU-...)");
        FLAGS.put("--target", "HOST::I,J (node1::0,2)");
        FLAGS.put("--shared", "share GPUs, reserving this much memory on each (4GB)");
        FLAGS.put("--owner", "who asks");
        FLAGS.put("--job", "job id");
        FLAGS.put("--label", "KEY=VALUE, repeatable");
        FLAGS.put("--lease", "allocation expires after this long (30s, 5m, 2h)");
    }

    private static final List<String> RESOURCE_KEYS = List.of("gpu_count", "gpu_memory_mb", "gpu_memory",
            "gpu_model", "gpu_vendor", "gpu_min_compute_capability", "gpu_shared_memory_mb");

    private GpuRequests() {
    }

    /**
     * Turns free text a host holds (a Spark application's name, a thread's name) into an identifier the builder
     * accepts ({@link GpuRequest.Builder#jobId}, {@link GpuRequest.Builder#owner}): each character that is not
     * printable becomes {@code ?}, plain spaces around it are dropped, and it is cut to {@code maxLength} characters
     * (code points); blank text gives {@code ?}.
     *
     * @param text      any text
     * @param maxLength at least 1, e.g. {@link GpuRequest#MAX_JOB_ID_LENGTH}
     * @return printable text of 1 to {@code maxLength} characters
     */
    public static String toIdentifier(String text, int maxLength) {
        if (maxLength < 1) {
            throw new IllegalArgumentException("maxLength must be at least 1, was " + maxLength);
        }
        StringBuilder b = new StringBuilder();
        String t = text == null ? "" : text.replaceAll("^ +| +$", "");
        t.codePoints().limit(maxLength).forEach(c -> b.appendCodePoint(Printable.isPrintable(c) ? c : '?'));
        String s = b.toString().replaceAll("^ +| +$", "");
        return s.isEmpty() ? "?" : s;
    }

    /** @return the flags {@link #fromCliFlags(List)} accepts, with what each means */
    public static Map<String, String> cliFlags() {
        return Map.copyOf(FLAGS);
    }

    /** @see #fromCliFlags(List) */
    public static GpuRequest fromCliFlags(String... args) {
        return fromCliFlags(Arrays.asList(args));
    }

    /**
     * Parses flags in {@code --flag=value} or {@code --flag value} form. Without {@code --gpu}, the count is 1 or
     * the number of explicit devices. Each flag may be given once ({@code --gpu} and {@code --gpus} are one flag);
     * {@code --label} may be repeated with distinct keys.
     *
     * @throws IllegalArgumentException on an unknown flag, a missing or invalid value, a repeated flag (or label
     *                                  key), or a contradiction between flags; the message names the flag and
     *                                  what would be valid. No other exception is thrown for any list of strings.
     * @throws NullPointerException     if {@code args} itself is null
     */
    public static GpuRequest fromCliFlags(List<String> args) {
        GpuRequest.Builder b = GpuRequest.builder();
        Map<String, String> given = new LinkedHashMap<>();
        Map<String, String> labels = new LinkedHashMap<>();
        for (int i = 0; i < args.size(); i++) {
            String arg = args.get(i);
            if (arg == null || !arg.startsWith("--")) {
                throw new IllegalArgumentException(
                        "unexpected argument \"" + Printable.clipped(arg) + "\"; GPU flags look like"
                                + " --gpu=2 --gpu-memory=8GB; known flags: " + FLAGS.keySet());
            }
            String flag;
            String value;
            int eq = arg.indexOf('=');
            if (eq >= 0) {
                flag = arg.substring(0, eq);
                value = arg.substring(eq + 1);
            } else {
                flag = arg;
                if (i + 1 >= args.size() || !FLAGS.containsKey(flag)) {
                    value = null;
                } else {
                    value = args.get(++i);
                }
            }
            if (!FLAGS.containsKey(flag)) {
                throw new IllegalArgumentException(
                        "unknown flag \"" + Printable.clipped(flag) + "\"; known flags: " + FLAGS.keySet());
            }
            if (value == null || value.isBlank()) {
                throw new IllegalArgumentException("flag " + flag + " needs a value: " + FLAGS.get(flag));
            }
            String same = flag.equals("--gpus") ? "--gpu" : flag;
            if (flag.equals("--label")) {
                int keyEnd = value.indexOf('=');
                String key = keyEnd > 0 ? value.substring(0, keyEnd).trim() : value.trim();
                String before = labels.put(key, value);
                if (before != null) {
                    throw new IllegalArgumentException("flag --label given twice for key \"" + Printable.clipped(key)
                            + "\" (" + Printable.clipped(before) + ", then " + Printable.clipped(value)
                            + "); give each label key once");
                }
            } else if (given.containsKey(same)) {
                throw new IllegalArgumentException("flag " + flag + " given twice ("
                        + Printable.clipped(given.get(same))
                        + ", then " + Printable.clipped(value) + "); give each flag once, only --label repeats");
            }
            given.put(same, value);
            try {
                // identifiers are checked as given (trim() would drop an escape or a newline at either end unseen)
                apply(b, flag, flag.equals("--owner") || flag.equals("--job") || flag.equals("--label")
                        ? value.replaceAll("^ +| +$", "") : value.trim());
            } catch (IllegalStateException e) {
                throw new IllegalArgumentException("flag " + flag + "=" + Printable.clipped(value)
                        + " conflicts with an earlier flag: "
                        + e.getMessage() + "; give either --devices or --target indices", e);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(
                        "flag " + flag + "=" + Printable.clipped(value) + ": " + e.getMessage(),
                        e);
            }
        }
        try {
            return b.build();
        } catch (IllegalArgumentException | IllegalStateException e) {
            throw new IllegalArgumentException("flags " + given.keySet() + " contradict each other: "
                    + e.getMessage() + "; " + "the count must match explicit devices, and a shared reservation must"
                    + " fit the memory asked for", e);
        }
    }

    private static void apply(GpuRequest.Builder b, String flag, String value) {
        switch (flag) {
            case "--gpu", "--gpus" -> b.count(parseCount(value));
            case "--gpu-memory" -> b.minMemory(MemorySize.parse(value));
            case "--min-cc" -> b.minComputeCapability(ComputeCapability.parse(value));
            case "--vendor" -> b.vendor(GpuVendor.parse(value));
            case "--model" -> b.modelPattern(value);
            case "--devices" -> b.deviceIndices(GpuTarget.parseIndices(value, "--devices"));
            case "--uuids" -> b.deviceUuids(List.of(value.split(",", -1)));
            case "--target" -> {
                GpuTarget t = GpuTarget.parse(value);
                t.host().ifPresent(h -> b.label(TARGET_HOST_LABEL, h));
                if (!t.indices().isEmpty()) {
                    b.deviceIndices(t.indices());
                }
            }
            case "--shared" -> {
                MemorySize m = MemorySize.parse(value);
                if (m.bytes() == 0) {
                    throw new IllegalArgumentException("a shared reservation must be more than 0 bytes, e.g. 4GB");
                }
                if (m.bytes() < GpuRequest.MIN_SHARED_BYTES) {
                    throw new IllegalArgumentException("a shared reservation must be at least 1MiB (CUDA's MPS memory"
                            + " limit counts whole MiB), was " + value + "; e.g. 512MiB or 4GB");
                }
                b.shared(m);
            }
            case "--owner" -> b.owner(value);
            case "--job" -> b.jobId(value);
            case "--lease" -> {
                Duration d = Durations.parse(value);
                if (d.isZero()) {
                    throw new IllegalArgumentException("a lease must be longer than 0, e.g. 30s or 5m");
                }
                b.maxDuration(d);
            }
            case "--label" -> {
                int eq = value.indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("expected KEY=VALUE, e.g. team=ml");
                }
                b.label(value.substring(0, eq), value.substring(eq + 1));
            }
            default -> throw new IllegalStateException("unhandled flag " + flag);
        }
    }

    private static int parseCount(String value) {
        if (!value.matches("[0-9]{1,9}") || Integer.parseInt(value) < 1) {
            throw new IllegalArgumentException("GPU count must be a whole number >= 1, was \"" + value + "\"");
        }
        return Integer.parseInt(value);
    }

    /**
     * Reads the GPU part of a workflow job's {@code resources:} map. Keys other than {@code gpu_*} (cpu, memory, …)
     * are ignored; unknown {@code gpu_*} keys are rejected. Accepted: {@code gpu_count} (0 or absent: no GPU),
     * {@code gpu_memory_mb} (MiB, a number), {@code gpu_memory} (a size string such as "8GB"), {@code gpu_model},
     * {@code gpu_vendor}, {@code gpu_min_compute_capability}, {@code gpu_shared_memory_mb}.
     *
     * @return the request, or empty when the job asks for no GPU
     * @throws IllegalArgumentException naming the key and the accepted values, for any map whatever its keys and
     *                                  values (a null key, a value of any type, a number too large); no other
     *                                  exception is thrown
     * @throws NullPointerException     if {@code resources} itself is null
     */
    public static Optional<GpuRequest> fromResources(Map<String, ?> resources) {
        try {
            return readResources(resources);
        } catch (IllegalArgumentException | IllegalStateException e) {
            String m = e.getMessage();
            throw new IllegalArgumentException(m.startsWith("resources") ? m : "resources: " + m, e);
        }
    }

    private static Optional<GpuRequest> readResources(Map<String, ?> resources) {
        Objects.requireNonNull(resources, "resources");
        for (Object k : resources.keySet()) {
            if (k == null) {
                throw new IllegalArgumentException("resources has an empty (null) key; keys are names such as"
                        + " gpu_count, valid GPU keys are " + new TreeSet<>(RESOURCE_KEYS));
            }
            String key = String.valueOf(k);
            if (key.startsWith("gpu") && !RESOURCE_KEYS.contains(key)) {
                throw new IllegalArgumentException("unknown GPU resource key \"resources." + key + "\"; valid keys are "
                        + new TreeSet<>(RESOURCE_KEYS));
            }
        }
        long count = wholeNumber(resources, "gpu_count", 0);
        if (count == 0) {
            for (String key : RESOURCE_KEYS) {
                if (resources.get(key) != null && !key.equals("gpu_count")) {
                    throw new IllegalArgumentException("resources." + key + " is set but resources.gpu_count is "
                            + (resources.containsKey("gpu_count") ? "0" : "absent") + "; set gpu_count >= 1");
                }
            }
            return Optional.empty();
        }
        if (count > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("resources.gpu_count " + count + " is too large; at most "
                    + Integer.MAX_VALUE);
        }
        GpuRequest.Builder b = GpuRequest.builder().count((int) count);
        if (resources.get("gpu_memory_mb") != null && resources.get("gpu_memory") != null) {
            throw new IllegalArgumentException("give resources.gpu_memory_mb or resources.gpu_memory, not both");
        }
        long mib = wholeNumber(resources, "gpu_memory_mb", 0);
        if (mib > 0) {
            b.minMemory(mebibytes("gpu_memory_mb", mib));
        }
        text(resources, "gpu_memory").ifPresent(s -> b.minMemory(wrap("gpu_memory", () -> MemorySize.parse(s))));
        text(resources, "gpu_model").ifPresent(b::modelPattern);
        text(resources, "gpu_vendor").ifPresent(s -> b.vendor(wrap("gpu_vendor", () -> GpuVendor.parse(s))));
        text(resources, "gpu_min_compute_capability").ifPresent(
                s -> b.minComputeCapability(wrap("gpu_min_compute_capability", () -> ComputeCapability.parse(s))));
        long shared = wholeNumber(resources, "gpu_shared_memory_mb", 0);
        if (shared > 0) {
            b.shared(mebibytes("gpu_shared_memory_mb", shared));
        }
        return Optional.of(b.build());
    }

    /** Largest MiB count that fits in a {@code long} of bytes. */
    private static final long MAX_MIB = Long.MAX_VALUE >> 20;

    private static MemorySize mebibytes(String key, long mib) {
        if (mib > MAX_MIB) {
            throw new IllegalArgumentException("resources." + key + " " + mib + " MiB is too large; at most " + MAX_MIB
                    + " (8 EiB)");
        }
        return MemorySize.ofMebibytes(mib);
    }

    private static <T> T wrap(String key, Supplier<T> s) {
        try {
            return s.get();
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("resources." + key + ": " + e.getMessage(), e);
        }
    }

    private static Optional<String> text(Map<String, ?> m, String key) {
        Object v = m.get(key);
        if (v == null) {
            return Optional.empty();
        }
        if (v instanceof Map || v instanceof List) {
            throw new IllegalArgumentException("resources." + key + " must be a single value, was " + v);
        }
        return Optional.of(String.valueOf(v).trim());
    }

    private static long wholeNumber(Map<String, ?> m, String key, long fallback) {
        Object v = m.get(key);
        if (v == null) {
            return fallback;
        }
        String s = String.valueOf(v).trim();
        if ((v instanceof Number || v instanceof CharSequence) && s.matches("[0-9]{1,18}")) {
            return Long.parseLong(s);
        }
        throw new IllegalArgumentException("resources." + key + " must be a whole number >= 0, was \"" + v + "\"");
    }

}
