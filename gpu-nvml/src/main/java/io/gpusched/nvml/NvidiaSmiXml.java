package io.gpusched.nvml;

import java.io.StringReader;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.xml.XMLConstants;
import javax.xml.parsers.DocumentBuilder;
import javax.xml.parsers.DocumentBuilderFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;
import org.xml.sax.InputSource;

/**
 * A tolerant parser for {@code nvidia-smi -q -x} (DTD v8 to v13): values of {@code N/A}, {@code [N/A]} or
 * "Requested functionality has been deprecated" read as absent; 4- and 8-digit PCI domains are normalized;
 * {@code attached_gpus} that disagrees with the {@code <gpu>} elements present is logged, and the elements win.
 * External entities and DTDs are never fetched.
 */
public final class NvidiaSmiXml {
    private static final Logger LOG = LoggerFactory.getLogger(NvidiaSmiXml.class);
    private static final Pattern NUMBER = Pattern.compile("^\\s*(-?[0-9]+(?:\\.[0-9]+)?)");

    /**
     * A MIG device.
     *
     * @param index             MIG index within its GPU
     * @param gpuInstanceId     GPU instance id
     * @param computeInstanceId compute instance id
     * @param uuid              MIG UUID where the DTD carries one
     * @param memoryTotalMib    framebuffer total
     * @param memoryUsedMib     framebuffer used
     */
    public record Mig(int index, int gpuInstanceId, int computeInstanceId, Optional<String> uuid,
            OptionalLong memoryTotalMib, OptionalLong memoryUsedMib) {
    }

    /**
     * One {@code <process_info>} of a GPU's {@code <processes>}: a process holding memory on it (or on one of its MIG
     * devices).
     *
     * @param pid               host pid
     * @param type              {@code C} (compute), {@code G} (graphics) or {@code C+G}, where given
     * @param gpuInstanceId     the MIG GPU instance it runs in ({@code N/A} off MIG: absent)
     * @param computeInstanceId the MIG compute instance
     * @param usedMemoryMib     memory it holds, where given
     */
    public record Process(int pid, Optional<String> type, OptionalInt gpuInstanceId, OptionalInt computeInstanceId,
            OptionalLong usedMemoryMib) {
    }

    /**
     * One {@code <gpu>}.
     *
     * @param pciBusId       normalized bus id
     * @param name           product name
     * @param uuid           GPU UUID
     * @param minor          device minor ({@code N/A} on Windows)
     * @param memoryTotalMib framebuffer total
     * @param memoryUsedMib  framebuffer used
     * @param utilization    GPU utilization %
     * @param temperature    GPU temperature °C
     * @param powerWatts     power draw
     * @param migEnabled     current MIG mode
     * @param migs           MIG devices
     * @param processes      the processes holding memory on it ({@code <processes>}); pids outside 1 to
     *                       2<sup>31</sup>-1 are left out
     */
    public record Gpu(String pciBusId, String name, String uuid, OptionalInt minor, OptionalLong memoryTotalMib,
            OptionalLong memoryUsedMib, OptionalDouble utilization, OptionalDouble temperature,
            OptionalDouble powerWatts, boolean migEnabled, List<Mig> migs, List<Process> processes) {
        /** Copies the lists. */
        public Gpu {
            migs = List.copyOf(migs);
            processes = List.copyOf(processes);
        }
    }

    /**
     * The whole report.
     *
     * @param driverVersion driver version
     * @param cudaVersion   CUDA version the driver supports
     * @param attachedGpus  what {@code attached_gpus} claims
     * @param gpus          the {@code <gpu>} elements, in document (= nvidia-smi index) order
     */
    public record Report(Optional<String> driverVersion, Optional<String> cudaVersion, OptionalInt attachedGpus,
            List<Gpu> gpus) {
    }

    private NvidiaSmiXml() {
    }

    /**
     * @throws IllegalArgumentException if the text is not an {@code nvidia_smi_log} document or a {@code <gpu>} lacks
     *                                  its bus id or UUID; no other exception is thrown for any text (values it
     *                                  cannot read, such as an absurd memory size, read as absent)
     */
    public static Report parse(String xml) {
        Document doc;
        try {
            doc = builder().parse(new InputSource(new StringReader(xml)));
        } catch (Exception e) {
            throw new IllegalArgumentException("nvidia-smi output is not valid XML: " + e.getMessage(), e);
        }
        Element root = doc.getDocumentElement();
        if (!"nvidia_smi_log".equals(root.getTagName())) {
            throw new IllegalArgumentException("nvidia-smi output has root <" + root.getTagName()
                    + ">, expected <nvidia_smi_log>");
        }
        List<Gpu> gpus = new ArrayList<>();
        for (Element g : children(root, "gpu")) {
            String bus = text(g, "pci", "pci_bus_id").or(() -> attr(g, "id"))
                    .orElseThrow(() -> new IllegalArgumentException("a <gpu> has no PCI bus id"));
            String uuid = text(g, "uuid").orElseThrow(() -> new IllegalArgumentException("GPU " + bus
                    + " has no uuid"));
            List<Mig> migs = new ArrayList<>();
            for (Element md : child(g, "mig_devices").map(m -> children(m, "mig_device")).orElse(List.of())) {
                OptionalInt gi = integer(text(md, "gpu_instance_id"));
                OptionalInt ci = integer(text(md, "compute_instance_id"));
                if (gi.isEmpty() || ci.isEmpty()) {
                    continue;
                }
                migs.add(new Mig(integer(text(md, "index")).orElse(migs.size()), gi.getAsInt(), ci.getAsInt(),
                        text(md, "uuid"), mib(text(md, "fb_memory_usage", "total")),
                        mib(text(md, "fb_memory_usage", "used"))));
            }
            List<Process> processes = new ArrayList<>();
            for (Element p : child(g, "processes").map(x -> children(x, "process_info")).orElse(List.of())) {
                OptionalInt pid = integer(text(p, "pid"));
                if (pid.isEmpty() || pid.getAsInt() < 1) {
                    continue;
                }
                processes.add(new Process(pid.getAsInt(), text(p, "type"), integer(text(p, "gpu_instance_id")),
                        integer(text(p, "compute_instance_id")), mib(text(p, "used_memory"))));
            }
            OptionalDouble power = number(text(g, "power_readings", "power_draw")
                    .or(() -> text(g, "gpu_power_readings", "instant_power_draw"))
                    .or(() -> text(g, "gpu_power_readings", "power_draw"))
                    .or(() -> text(g, "gpu_power_readings", "average_power_draw")));
            gpus.add(new Gpu(PciBusIds.normalize(bus).orElse(bus), text(g, "product_name").orElse("NVIDIA GPU"), uuid,
                    integer(text(g, "minor_number")), mib(text(g, "fb_memory_usage", "total")),
                    mib(text(g, "fb_memory_usage", "used")), number(text(g, "utilization", "gpu_util")),
                    number(text(g, "temperature", "gpu_temp")), power,
                    text(g, "mig_mode", "current_mig").map(s -> s.equalsIgnoreCase("Enabled")).orElse(false), migs,
                    processes));
        }
        OptionalInt attached = integer(text(root, "attached_gpus"));
        if (attached.isPresent() && attached.getAsInt() != gpus.size()) {
            LOG.warn("nvidia-smi says attached_gpus={} but lists {} <gpu> elements; using the elements",
                    attached.getAsInt(), gpus.size());
        }
        return new Report(text(root, "driver_version"), text(root, "cuda_version"), attached, gpus);
    }

    private static DocumentBuilder builder() throws Exception {
        DocumentBuilderFactory f = DocumentBuilderFactory.newInstance();
        f.setFeature(XMLConstants.FEATURE_SECURE_PROCESSING, true);
        f.setFeature("http://xml.org/sax/features/external-general-entities", false);
        f.setFeature("http://xml.org/sax/features/external-parameter-entities", false);
        f.setFeature("http://apache.org/xml/features/nonvalidating/load-external-dtd", false);
        f.setAttribute(XMLConstants.ACCESS_EXTERNAL_DTD, "");
        f.setAttribute(XMLConstants.ACCESS_EXTERNAL_SCHEMA, "");
        f.setXIncludeAware(false);
        f.setExpandEntityReferences(false);
        f.setValidating(false);
        f.setNamespaceAware(false);
        DocumentBuilder b = f.newDocumentBuilder();
        b.setErrorHandler(null);
        return b;
    }

    private static List<Element> children(Element parent, String tag) {
        List<Element> out = new ArrayList<>();
        NodeList nl = parent.getChildNodes();
        for (int i = 0; i < nl.getLength(); i++) {
            Node n = nl.item(i);
            if (n instanceof Element e && e.getTagName().equals(tag)) {
                out.add(e);
            }
        }
        return out;
    }

    private static Optional<Element> child(Element parent, String tag) {
        List<Element> c = children(parent, tag);
        return c.isEmpty() ? Optional.empty() : Optional.of(c.get(0));
    }

    private static Optional<String> attr(Element e, String name) {
        String v = e.getAttribute(name);
        return v == null || v.isBlank() ? Optional.empty() : Optional.of(v.trim());
    }

    /** @return the text at a path of child tags, absent for N/A-like values */
    static Optional<String> text(Element e, String... path) {
        Element cur = e;
        for (String p : path) {
            Optional<Element> c = child(cur, p);
            if (c.isEmpty()) {
                return Optional.empty();
            }
            cur = c.get();
        }
        String t = cur.getTextContent().trim();
        if (t.isEmpty() || t.equalsIgnoreCase("N/A") || t.equalsIgnoreCase("[N/A]") || t.contains("deprecated")
                || t.startsWith("[") || t.equalsIgnoreCase("Unknown Error") || t.equalsIgnoreCase("Not Supported")) {
            return Optional.empty();
        }
        return Optional.of(t);
    }

    static OptionalDouble number(Optional<String> s) {
        if (s.isEmpty()) {
            return OptionalDouble.empty();
        }
        Matcher m = NUMBER.matcher(s.get());
        return m.find() ? OptionalDouble.of(Double.parseDouble(m.group(1))) : OptionalDouble.empty();
    }

    static OptionalInt integer(Optional<String> s) {
        return s.filter(x -> x.matches("[0-9]{1,9}")).map(x -> OptionalInt.of(Integer.parseInt(x)))
                .orElse(OptionalInt.empty());
    }

    /** "32510 MiB" → 32510; other units are converted to MiB; more than 15 digits (no real GPU) reads as absent. */
    static OptionalLong mib(Optional<String> s) {
        if (s.isEmpty()) {
            return OptionalLong.empty();
        }
        // at most 15 digits: Long.parseLong cannot overflow and "GiB" x 1024 stays below 2^63 (found by fuzzing)
        Matcher m = Pattern.compile("^\\s*([0-9]{1,15})\\s*(MiB|GiB|KiB|B)?\\s*$").matcher(s.get());
        if (!m.matches()) {
            return OptionalLong.empty();
        }
        long v = Long.parseLong(m.group(1));
        String unit = m.group(2) == null ? "MiB" : m.group(2);
        return OptionalLong.of(switch (unit) {
            case "GiB" -> v * 1024;
            case "KiB" -> v / 1024;
            case "B" -> v >> 20;
            default -> v;
        });
    }
}
