package io.gpusched.nvml;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Reads each GPU's {@code /proc/driver/nvidia/gpus/<bus>/information}; the driver version banner is read by
 * {@link io.gpusched.core.internal.NvidiaDriver}.
 */
public final class ProcDriverNvidia {

    /**
     * One GPU as the kernel module describes it.
     *
     * @param model       product name
     * @param uuid        GPU UUID
     * @param busLocation PCI bus location ({@code 0000:06:00.0})
     * @param minor       device minor
     */
    public record GpuInfo(String model, String uuid, String busLocation, OptionalInt minor) {
    }

    private ProcDriverNvidia() {
    }

    /** @return the "Key: value" lines of an {@code information} file; malformed lines are skipped */
    static Map<String, String> fields(String text) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String line : text.split("\n")) {
            int colon = line.indexOf(':');
            if (colon > 0) {
                out.put(line.substring(0, colon).trim(), line.substring(colon + 1).trim());
            }
        }
        return out;
    }

    /**
     * Parses one {@code information} file.
     *
     * @return the GPU, or empty when the model or UUID is missing
     */
    public static Optional<GpuInfo> parseInformation(String text, String dirName) {
        Map<String, String> f = fields(text);
        String model = f.get("Model");
        String uuid = f.get("GPU UUID");
        if (model == null || uuid == null || model.isBlank() || uuid.isBlank()) {
            return Optional.empty();
        }
        String bus = f.getOrDefault("Bus Location", dirName);
        OptionalInt minor = OptionalInt.empty();
        String m = f.get("Device Minor");
        if (m != null && m.matches("[0-9]{1,6}")) {
            minor = OptionalInt.of(Integer.parseInt(m));
        }
        return Optional.of(new GpuInfo(model, uuid, bus, minor));
    }

    /** @return every GPU under {@code procRoot/driver/nvidia/gpus}, in PCI bus order */
    public static List<GpuInfo> gpus(Path procRoot) throws IOException {
        Path dir = procRoot.resolve("driver/nvidia/gpus");
        List<GpuInfo> out = new ArrayList<>();
        if (!Files.isDirectory(dir)) {
            return out;
        }
        try (Stream<Path> s = Files.list(dir)) {
            for (Path g : s.sorted().toList()) {
                Path info = g.resolve("information");
                if (Files.isRegularFile(info)) {
                    parseInformation(Files.readString(info), g.getFileName().toString()).ifPresent(out::add);
                }
            }
        }
        out.sort(Comparator.comparing(g -> PciBusIds.normalize(g.busLocation()).orElse(g.busLocation())));
        return out;
    }

    /** @return memory in GiB read off a product name such as "Tesla V100-SXM2-32GB" or "H100 80GB HBM3", or empty */
    static OptionalInt memoryFromModel(String model) {
        Matcher m = Pattern.compile("(?<![0-9])([0-9]{1,4})\\s?GB\\b").matcher(model);
        return m.find() ? OptionalInt.of(Integer.parseInt(m.group(1))) : OptionalInt.empty();
    }
}
