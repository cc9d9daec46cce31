package io.gpusched.flink.adversarial.dropin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.testing.ClassPathEntry;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Flink drop-in jar the way a TaskManager gets it. A child JVM whose class path is Flink's own (from
 * Maven: no gpusched module, no test tool) reads a conf directory holding README's {@code config.yaml} block with
 * Flink's {@code GlobalConfiguration}, builds the plugin manager from {@code $FLINK_PLUGINS_DIR} where
 * {@code gpusched/} holds the drop-in jar alone, and asks for the external resource infos as
 * {@code TaskManagerRunner} does. README: "Put it, alone, in a plugin directory of every TaskManager".
 */
@Tag("adversarial")
class FlinkDropInJarIT {

    @TempDir
    Path tmp;

    /** README's config.yaml block, exactly as in README.md. */
    private static List<String> readmeBlock() throws Exception {
        List<String> lines = Files.readAllLines(Path.of("..", "README.md"));
        int start = lines.indexOf("external-resources: gpu");
        assertTrue(start > 0, "README's Flink config.yaml block");
        List<String> out = new ArrayList<>();
        for (int i = start; !lines.get(i).startsWith("```"); i++) {
            out.add(lines.get(i));
        }
        return out;
    }

    @Test
    void aTaskManagerWithTheJarAloneInPluginsGetsItsGpus() throws Exception {
        Path jar = Path.of(System.getProperty("gpusched.dropInJar", "target/none.jar"));
        assertTrue(Files.isRegularFile(jar), "the drop-in jar (failsafe runs after package): " + jar);
        Path state = Files.createDirectories(tmp.resolve("state"));
        Files.setPosixFilePermissions(state, PosixFilePermissions.fromString("rwx------"));
        Path conf = Files.createDirectories(tmp.resolve("conf"));
        List<String> yaml = new ArrayList<>();
        for (String l : readmeBlock()) {
            // the two settings a test node needs instead of the node's: its own ledger, a simulated DGX-1
            if (l.startsWith("external-resource.gpu.param.state-dir:")) {
                l = "external-resource.gpu.param.state-dir: " + state;
            } else if (l.startsWith("external-resource.gpu.param.inventory:")) {
                l = "external-resource.gpu.param.inventory: simulated:dgx1-v100";
            }
            yaml.add(l);
        }
        Files.write(conf.resolve("config.yaml"), yaml);
        Path plugins = Files.createDirectories(tmp.resolve("plugins").resolve("gpusched"));
        Files.copy(jar, plugins.resolve(jar.getFileName()));

        List<String> cp = new ArrayList<>();
        for (ClassPathEntry e : ClassPathEntry.current()) {
            // gpusched's own modules (build outputs, module jars, any installed copy): by their classes, not paths
            boolean gpusched = e.isGpusched();
            boolean tool = e.isArtifactStartingWith("junit", "opentest4j", "apiguardian", "assertj", "byte-buddy",
                    "mockito");
            if (!gpusched && !tool) {
                cp.add(e.path().toString());
            }
        }
        cp.add(Path.of("target", "test-classes").toAbsolutePath().toString()); // the child's main only
        ProcessBuilder pb = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", String.join(File.pathSeparator, cp), Child.class.getName(), conf.toString())
                .redirectErrorStream(true);
        pb.environment().put("FLINK_PLUGINS_DIR", tmp.resolve("plugins").toString());
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(120, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("gpus=2 "), "README's amount 2: " + out);
    }

    /** The TaskManager's side, in the child JVM: only Flink's classes on its class path. */
    public static final class Child {
        public static void main(String[] args) throws Exception {
            try {
                Class.forName("io.gpusched.core.GpuScheduler");
                throw new AssertionError("gpusched is on the application class path: the test is not honest");
            } catch (ClassNotFoundException expected) {
                // only the plugin directory has it
            }
            org.apache.flink.configuration.Configuration c =
                    org.apache.flink.configuration.GlobalConfiguration.loadConfiguration(args[0]);
            org.apache.flink.core.plugin.PluginManager pm =
                    org.apache.flink.core.plugin.PluginUtils.createPluginManagerFromRootFolder(c);
            org.apache.flink.runtime.externalresource.ExternalResourceInfoProvider provider =
                    org.apache.flink.runtime.externalresource.ExternalResourceUtils
                            .createStaticExternalResourceInfoProviderFromConfig(c, pm);
            java.util.Set<? extends org.apache.flink.api.common.externalresource.ExternalResourceInfo> infos =
                    provider.getExternalResourceInfos("gpu");
            StringBuilder b = new StringBuilder("gpus=" + infos.size() + " ");
            for (org.apache.flink.api.common.externalresource.ExternalResourceInfo i : infos) {
                b.append(i.getProperty("index").orElse("?")).append('/').append(i.getProperty("uuid").orElse("?"))
                        .append(' ');
            }
            System.out.println(b);
        }
    }
}
