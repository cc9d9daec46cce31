package io.gpusched.cdi.adversarial;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cdi.CdiOptions;
import io.gpusched.cdi.CdiSpec;
import io.gpusched.cdi.ContainerDevices;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.NodeDescriptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;

/**
 * Adversarial review of issue 26 (CDI specs, allocate formats): a CDI v0.5.0 schema written here from the CDI spec
 * (fields of 0.5.0 only: no annotations, additionalGids, intelRdt), hostile node descriptions and the write path.
 */
@Tag("adversarial")
class CdiAdversarialTest {
    @TempDir
    Path tmp;

    static final ObjectMapper JSON = new ObjectMapper();
    static final Set<String> TOP = Set.of("cdiVersion", "kind", "devices", "containerEdits");
    static final Set<String> DEVICE = Set.of("name", "containerEdits");
    static final Set<String> EDITS = Set.of("env", "deviceNodes", "hooks", "mounts");
    static final Set<String> NODE = Set.of("path", "hostPath", "type", "major", "minor", "fileMode", "permissions",
            "uid", "gid");
    static final Set<String> MOUNT = Set.of("hostPath", "containerPath", "type", "options");
    static final Set<String> HOOK = Set.of("hookName", "path", "args", "env", "timeout");

    static void keys(JsonNode n, Set<String> allowed, String where) {
        assertThat(n.isObject()).as(where + " is an object").isTrue();
        for (Iterator<String> it = n.fieldNames(); it.hasNext();) {
            String k = it.next();
            assertThat(allowed).as("unknown field %s at %s", k, where).contains(k);
        }
    }

    static void edits(JsonNode e, String where) {
        keys(e, EDITS, where);
        if (e.has("env")) {
            e.get("env").forEach(v -> assertThat(v.asText()).as(where + ".env").matches("[A-Za-z_][A-Za-z0-9_]*=.*"));
        }
        if (e.has("deviceNodes")) {
            for (JsonNode d : e.get("deviceNodes")) {
                keys(d, NODE, where + ".deviceNodes");
                assertThat(d.get("path").asText()).startsWith("/");
                if (d.has("type")) {
                    assertThat(d.get("type").asText()).isIn("c", "b", "u", "p");
                }
                if (d.has("permissions")) {
                    assertThat(d.get("permissions").asText()).matches("[rwm]{1,3}");
                }
            }
        }
        if (e.has("mounts")) {
            for (JsonNode m : e.get("mounts")) {
                keys(m, MOUNT, where + ".mounts");
                assertThat(m.get("hostPath").asText()).startsWith("/");
                assertThat(m.get("containerPath").asText()).startsWith("/");
            }
        }
        if (e.has("hooks")) {
            e.get("hooks").forEach(h -> keys(h, HOOK, where + ".hooks"));
        }
    }

    /** Validates one spec per CDI v0.5.0 and returns its device names. */
    static List<String> validate(String json) throws Exception {
        JsonNode s = JSON.readTree(json);
        keys(s, TOP, "spec");
        assertThat(s.get("cdiVersion").asText()).isIn("0.3.0", "0.4.0", "0.5.0");
        String kind = s.get("kind").asText();
        // 0.5.0: vendor is a domain-ish name, class has no dot (dotted class is 0.6.0)
        assertThat(kind).matches("[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_-]*");
        assertThat(s.get("devices").isArray()).isTrue();
        assertThat(s.get("devices").size()).isPositive();
        List<String> names = new ArrayList<>();
        boolean digitStart = false;
        for (JsonNode d : s.get("devices")) {
            keys(d, DEVICE, "device");
            String name = d.get("name").asText();
            assertThat(name).as("device name").matches("[A-Za-z0-9][A-Za-z0-9_.:-]*");
            digitStart |= Character.isDigit(name.charAt(0));
            names.add(name);
            assertThat(d.has("containerEdits")).isTrue();
            edits(d.get("containerEdits"), "device " + name);
        }
        if (s.has("containerEdits")) {
            edits(s.get("containerEdits"), "spec");
        }
        assertThat(names).as("unique device names").doesNotHaveDuplicates();
        boolean hostPath = json.contains("\"hostPath\"") && s.toString().contains("deviceNodes");
        if (!digitStart && !hostPath) {
            assertThat(s.get("cdiVersion").asText()).as("lowest cdiVersion").isEqualTo("0.3.0");
        }
        return names;
    }

    static Path dev(Path dir) throws Exception {
        Path dev = Files.createDirectories(dir.resolve("dev"));
        for (String n : List.of("nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")) {
            Files.writeString(dev.resolve(n), "");
        }
        return dev;
    }

    /** gpu-slurm's captured /proc of an NVIDIA host (dynamic majors, MIG cap minors; see its INDEX). */
    static final Path PROC_NVIDIA = Path.of("../gpu-slurm/src/test/resources/captures/proc-nvidia").toAbsolutePath()
            .normalize();
    static final Path PROC_AMD = Path.of("../gpu-slurm/src/test/resources/captures/proc-amd").toAbsolutePath()
            .normalize();

    static CdiOptions opts(Path dev) {
        return CdiOptions.defaults().withDevRoot(dev).withProcRoot(PROC_NVIDIA);
    }

    @ParameterizedTest
    @ValueSource(strings = {"dgx1-v100", "dgx-h100", "pcie-4xa10", "mi210-8x"})
    void everyBuiltInSpecIsValid050JsonAndYamlAgree(String node) throws Exception {
        Path dev = dev(tmp);
        try (GpuInventory inv = GpuInventories.simulated(node)) {
            for (CdiSpec spec : CdiSpec.of(inv, opts(dev))) {
                List<String> names = validate(spec.toJson());
                assertThat(names).containsAll(spec.deviceNames()).hasSameSizeAs(spec.deviceNames());
                Object y = new Yaml(new SafeConstructor(new LoaderOptions())).load(spec.toYaml());
                assertThat((Object) JSON.valueToTree(y)).isEqualTo(JSON.readTree(spec.toJson()));
                assertThat(spec.toJson()).isEqualTo(CdiSpec.of(inv, opts(dev)).get(0).toJson());
                assertThat(names).contains("all");
                for (var d : inv.devices()) {
                    assertThat(names).contains(String.valueOf(d.index()), d.uuid());
                }
            }
        }
    }

    @Test
    void sameBytesUnderTurkishLocaleAndAnotherTimeZone() throws Exception {
        Path dev = dev(tmp);
        String before;
        try (GpuInventory inv = GpuInventories.simulated("mi210-8x")) {
            CdiSpec s = CdiSpec.of(inv, opts(dev).withProcRoot(PROC_AMD)).get(0);
            before = s.toJson() + s.toYaml();
        }
        java.util.Locale l = java.util.Locale.getDefault();
        java.util.TimeZone tz = java.util.TimeZone.getDefault();
        try {
            java.util.Locale.setDefault(java.util.Locale.forLanguageTag("tr-TR"));
            java.util.TimeZone.setDefault(java.util.TimeZone.getTimeZone("Asia/Kathmandu"));
            try (GpuInventory inv = GpuInventories.simulated("mi210-8x")) {
                CdiSpec s = CdiSpec.of(inv, opts(dev).withProcRoot(PROC_AMD)).get(0);
                assertThat(s.toJson() + s.toYaml()).isEqualTo(before);
            }
        } finally {
            java.util.Locale.setDefault(l);
            java.util.TimeZone.setDefault(tz);
        }
    }

    static String yamlNode(String devices) {
        return "node: adv\ndescription: adversarial\ndefaults: {vendor: NVIDIA, name: NVIDIA A100-SXM4-40GB, "
                + "memory: 40GiB, compute_capability: \"8.0\"}\ndevices:\n" + devices;
    }

    @Test
    void hostileUuidsGiveUniqueValidNames() throws Exception {
        // device 0's UUID reads like device 1's index name; device 1's UUID is not a valid CDI name ('/', as in an
        // older driver's MIG UUIDs); a UUID with a space is refused where node descriptions enter (issue 36)
        assertThat(org.assertj.core.api.Assertions.catchThrowable(() -> NodeDescriptions.parse(yamlNode(
                "  - {index: 0, uuid: \"GPU with space/x\", pci_bus_id: \"00000000:11:00.0\"}\n"), "adv.yaml")))
                .isInstanceOf(GpuException.class).hasMessageContaining("uuid");
        String d = "  - {index: 0, uuid: \"1\", pci_bus_id: \"00000000:10:00.0\"}\n"
                + "  - {index: 1, uuid: \"GPU-x/1/0\", pci_bus_id: \"00000000:11:00.0\"}\n"
                + "  - {index: 2, uuid: all, pci_bus_id: \"00000000:12:00.0\"}\n";
        Path dev = dev(tmp);
        try (GpuInventory inv = NodeDescriptions.parse(yamlNode(d), "adv.yaml")) {
            List<CdiSpec> specs;
            try {
                specs = CdiSpec.of(inv, opts(dev));
            } catch (GpuException refused) {
                assertThat(refused.getMessage()).containsAnyOf("uuid", "UUID", "name");
                return;
            }
            for (CdiSpec s : specs) {
                validate(s.toJson());
            }
        }
    }

    @Test
    void dottedClassKindIsNeverWritten() {
        Path dev = tmp.resolve("dev");
        CdiOptions o;
        try {
            o = CdiOptions.defaults().withNvidiaKind("nvidia.com/gpu.mig").withDevRoot(dev);
        } catch (GpuException refused) {
            return; // refusing it is fine
        }
        try (GpuInventory inv = GpuInventories.simulated("pcie-4xa10")) {
            CdiSpec s = CdiSpec.of(inv, o).get(0);
            assertThat(s.cdiVersion()).as("a dotted class needs 0.6.0, which podman 4.3 ignores; refuse it instead")
                    .isNotEqualTo("0.5.0");
        }
    }

    @Test
    void writeRefusesGroupOrOtherWritableAndSymlinkedDirsAndLeavesNoTemp() throws Exception {
        Path dev = dev(tmp);
        try (GpuInventory inv = GpuInventories.simulated("pcie-4xa10")) {
            CdiSpec s = CdiSpec.of(inv, opts(dev)).get(0);
            for (String mode : List.of("rwxrwxr-x", "rwxr-xrwx", "rwxrwxrwx")) {
                Path d = Files.createDirectory(tmp.resolve("cdi-" + mode));
                Files.setPosixFilePermissions(d, PosixFilePermissions.fromString(mode));
                assertThatThrownBy(() -> s.writeTo(d, "json")).as(mode).isInstanceOf(GpuException.class)
                        .hasMessageContaining(d.toString());
                try (var l = Files.list(d)) {
                    assertThat(l).as("nothing written into a refused dir").isEmpty();
                }
            }
            // a symlink to a writable-by-others dir
            Path open = Files.createDirectory(tmp.resolve("open"));
            Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxrwxrwx"));
            Path link = Files.createSymbolicLink(tmp.resolve("cdi-link"), open);
            assertThatThrownBy(() -> s.writeTo(link, "json")).isInstanceOf(GpuException.class);
            // good dir: exact bytes, no temp files, not writable by others; a symlink at the file name is replaced,
            // never written through
            Path good = Files.createDirectory(tmp.resolve("good"));
            Files.setPosixFilePermissions(good, PosixFilePermissions.fromString("rwxr-xr-x"));
            Path victim = Files.writeString(tmp.resolve("victim"), "keep");
            Files.createSymbolicLink(good.resolve(s.fileName("json")), victim);
            Path f = s.writeTo(good, "json");
            assertThat(Files.readString(victim)).isEqualTo("keep");
            assertThat(Files.isSymbolicLink(f)).isFalse();
            assertThat(Files.readString(f)).isEqualTo(s.toJson());
            try (var l = Files.list(good)) {
                assertThat(l.map(p -> p.getFileName().toString()).toList()).containsExactly(s.fileName("json"));
            }
            assertThat(Files.getPosixFilePermissions(f).toString()).doesNotContain("OTHERS_WRITE", "GROUP_WRITE");
            assertThat(s.fileName("yaml")).endsWith(".yaml");
            assertThatThrownBy(() -> s.render("yml")).isInstanceOf(RuntimeException.class).hasMessageContaining("yml");
        }
    }

    @Test
    void dockerArgsAreExactlyTheAllocationsNodesAndControlNodes() throws Exception {
        Path dev = dev(tmp);
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false)
                     .maintenanceInterval(Duration.ZERO).build()) {
            Allocation a = s.allocate(GpuRequest.builder().count(2).requiredDevices(6, 3).build());
            ContainerDevices c = ContainerDevices.of(a, inv.devices(), opts(dev));
            Set<String> containerPaths = new TreeSet<>();
            for (String f : c.dockerArgs()) {
                if (f.startsWith("--device=")) {
                    String v = f.substring("--device=".length());
                    containerPaths.add(v.contains(":") ? v.substring(v.indexOf(':') + 1) : v);
                }
            }
            Set<String> want = new TreeSet<>();
            for (var d : a.devices()) {
                want.add("/dev/nvidia" + d.minor().getAsInt());
            }
            want.addAll(List.of("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"));
            assertThat(containerPaths).isEqualTo(want);
            String uuids = String.join(",", a.deviceUuids());
            assertThat(c.environment()).containsEntry("CUDA_VISIBLE_DEVICES", uuids);
            // cdi names are names the node's spec has, and no other device's
            CdiSpec spec = CdiSpec.of(inv, opts(dev)).get(0);
            Set<String> names = new HashSet<>();
            c.cdiNames().forEach(n -> names.add(n.substring(n.indexOf('=') + 1)));
            assertThat(spec.deviceNames()).containsAll(names);
            assertThat(names).hasSize(2).doesNotContain("all");
            // -e pairs are well formed
            List<String> d = c.dockerArgs();
            for (int i = 0; i < d.size(); i++) {
                if (d.get(i).equals("-e")) {
                    assertThat(d.get(i + 1)).matches("[A-Z_]+=.+");
                }
            }
        }
    }

    @Test
    void migSpecIsValidAndEachMigDeviceCarriesItsParentAndCaps() throws Exception {
        Path dev = dev(tmp);
        Path yaml = Path.of("../gpu-slurm/src/test/resources/captures/h100-mig.yaml").toAbsolutePath().normalize();
        try (GpuInventory inv = NodeDescriptions.load(yaml);
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false)
                     .maintenanceInterval(Duration.ZERO).build()) {
            CdiSpec spec = CdiSpec.of(inv, opts(dev)).get(0);
            List<String> names = validate(spec.toJson());
            assertThat(names).contains("0:0", "0:1", "0:2", "0:3", "all");
            JsonNode root = JSON.readTree(spec.toJson());
            Set<String> capsSeen = new HashSet<>();
            for (JsonNode d : root.get("devices")) {
                String name = d.get("name").asText();
                if (name.equals("all")) {
                    continue;
                }
                List<String> paths = new ArrayList<>();
                d.get("containerEdits").get("deviceNodes").forEach(n -> paths.add(n.get("path").asText()));
                assertThat(paths).as(name).contains("/dev/nvidia0")
                        .anySatisfy(p -> assertThat(p).startsWith("/dev/nvidia-caps/"));
                if (name.matches("[0-9]+")) {
                    // two MIG devices on different GPU instances never share a GI cap
                    capsSeen.add(String.join(",", paths));
                }
            }
            assertThat(capsSeen).as("each MIG device has its own caps").hasSize(4);
            Allocation a = s.allocate(GpuRequest.builder().count(1).requiredDevices(2).build());
            ContainerDevices c = ContainerDevices.of(a, inv.devices(), opts(dev));
            assertThat(c.environment().get("CUDA_VISIBLE_DEVICES")).isEqualTo(a.devices().get(0).uuid())
                    .startsWith("MIG-");
            assertThat(c.dockerArgs()).anySatisfy(f -> assertThat(f).contains("/dev/nvidia-caps/"))
                    .anySatisfy(f -> assertThat(f).endsWith(":/dev/nvidia0"));
        }
    }

    /**
     * nvidia-modeset is optional (asked for and present only); the uvm nodes are not: every CUDA program needs them,
     * so they are handed out even where the host's /dev lacks them yet (the module is loaded on demand), and the
     * runtime, not gpusched, says so when they are still missing at container start.
     */
    @Test
    void anAbsentModesetNodeIsNotHandedOutButTheUvmNodesAlwaysAre() throws Exception {
        Path dev = Files.createDirectories(tmp.resolve("bare-dev"));
        try (GpuInventory inv = GpuInventories.simulated("pcie-4xa10");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false)
                     .maintenanceInterval(Duration.ZERO).build()) {
            Allocation a = s.allocate(GpuRequest.builder().count(1).build());
            ContainerDevices c = ContainerDevices.of(a, inv.devices(), opts(dev));
            assertThat(c.dockerArgs()).noneSatisfy(f -> assertThat(f).contains("nvidia-modeset"))
                    .anySatisfy(f -> assertThat(f).endsWith(":/dev/nvidia-uvm"))
                    .anySatisfy(f -> assertThat(f).endsWith(":/dev/nvidia-uvm-tools"));
            JsonNode spec = JSON.readTree(CdiSpec.of(inv, opts(dev)).get(0).toJson());
            assertThat(spec.toString()).doesNotContain("nvidia-modeset").contains("\"/dev/nvidia-uvm\"")
                    .contains("\"/dev/nvidia-uvm-tools\"");
        }
    }

    @Test
    void envOfAnAllocationNamesItsUuidsAndNoOtherSelector() throws Exception {
        Path dev = dev(tmp);
        try (GpuInventory inv = GpuInventories.simulated("mi210-8x");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false)
                     .maintenanceInterval(Duration.ZERO).build()) {
            Allocation a = s.allocate(GpuRequest.builder().count(2).build());
            ContainerDevices c = ContainerDevices.of(a, inv.devices(), opts(dev).withProcRoot(PROC_AMD));
            Map<String, String> env = c.environment();
            assertThat(env).containsKey("ROCR_VISIBLE_DEVICES").doesNotContainKey("CUDA_VISIBLE_DEVICES")
                    .doesNotContainKey("NVIDIA_VISIBLE_DEVICES");
            assertThat(env.get("ROCR_VISIBLE_DEVICES").split(",")).hasSize(2);
            assertThat(c.dockerArgs()).anySatisfy(f -> assertThat(f).endsWith("/dev/kfd"));
        }
    }
}
