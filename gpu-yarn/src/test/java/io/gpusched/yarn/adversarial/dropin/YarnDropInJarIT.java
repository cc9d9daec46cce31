package io.gpusched.yarn.adversarial.dropin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.testing.ClassPathEntry;
import java.io.File;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.jar.JarFile;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import java.util.zip.ZipFile;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The YARN drop-in jar as a NodeManager's class loader sees it. README: "jackson and SnakeYAML relocated
 * under io.gpusched.shaded; Hadoop and slf4j come from the NodeManager. Put it alone into the NodeManager's lib
 * directory". Checked from the jar file itself (read here, with the JDK's multi-release view, as a class loader on
 * JDK 17 reads it) and from the NodeManager's own POM in the local Maven repository (what Hadoop's distribution puts
 * into {@code share/hadoop/yarn/lib}, the same directory).
 */
@Tag("adversarial")
class YarnDropInJarIT {

    static Path jar;

    @BeforeAll
    static void findJar() throws Exception {
        try (Stream<Path> s = Files.list(Path.of("target"))) {
            jar = s.filter(p -> p.getFileName().toString().matches("gpusched-yarn-.*\\.jar")).findFirst()
                    .orElseThrow(() -> new AssertionError("target/gpusched-yarn-<version>.jar is missing: the *IT"
                            + " tests run after package"));
        }
    }

    /** @return the class entries a JDK 17 class loader resolves in the jar (versioned entries where it is MR) */
    private static Set<String> classesAsLoaded() throws Exception {
        Set<String> out = new TreeSet<>();
        try (JarFile jf = new JarFile(jar.toFile(), true, ZipFile.OPEN_READ, Runtime.version())) {
            jf.versionedStream().map(e -> e.getName()).filter(n -> n.endsWith(".class") && !n.startsWith("META-INF/"))
                    .filter(n -> !n.endsWith("module-info.class")).forEach(out::add);
            // a versioned entry a loader serves under its base name: JarFile#getEntry resolves it when MR is on
            jf.stream().map(e -> e.getName()).filter(n -> n.startsWith("META-INF/versions/") && n.endsWith(".class"))
                    .map(n -> n.replaceFirst("^META-INF/versions/\\d+/", ""))
                    .filter(n -> !n.endsWith("module-info.class"))
                    .filter(n -> jf.getEntry(n) != null).forEach(out::add);
        }
        return out;
    }

    /**
     * Every class the NodeManager's loader can get from the jar is gpusched's own (io.gpusched, the relocated
     * libraries under io.gpusched.shaded) or JNA (kept whole on purpose): no com.fasterxml or org.yaml class may be
     * served under its own name, where it would meet (and on class path order win over) Hadoop's Jackson/SnakeYAML.
     */
    @Test
    void noUnrelocatedJacksonOrSnakeYamlClassIsServed() throws Exception {
        List<String> stray = new ArrayList<>();
        for (String c : classesAsLoaded()) {
            if (!c.startsWith("io/gpusched/") && !c.startsWith("com/sun/jna/")) {
                stray.add(c);
            }
        }
        assertEquals(List.of(), stray, "classes served unrelocated by " + jar.getFileName()
                + " (Multi-Release manifest + META-INF/versions copies the relocation did not rewrite)");
    }

    /**
     * What that does to a host: a NodeManager lib directory with this jar and another jar carrying SnakeYAML (an
     * auxiliary service, a user's library; SnakeYAML 2.x is on this test's class path). With the drop-in jar first, a
     * class loader asked for {@code org.yaml.snakeyaml.internal.Logger} finds the drop-in's versioned entry, whose
     * bytes are the relocated class, and fails with NoClassDefFoundError (wrong name) instead of reaching the real
     * SnakeYAML behind it.
     */
    @Test
    void theDropInJarDoesNotBreakAnotherSnakeYamlOnTheSameClassPath() throws Exception {
        Path snakeyaml = null;
        for (ClassPathEntry e : ClassPathEntry.current()) {
            if (e.isArtifact("snakeyaml") && e.path().getFileName().toString().startsWith("snakeyaml-2")) {
                snakeyaml = e.path();
            }
        }
        org.junit.jupiter.api.Assumptions.assumeTrue(snakeyaml != null, "no SnakeYAML 2.x jar on the class path");
        try (java.net.URLClassLoader l = new java.net.URLClassLoader(new java.net.URL[]{jar.toUri().toURL(),
            snakeyaml.toUri().toURL()}, ClassLoader.getPlatformClassLoader())) {
            Class<?> c;
            try {
                c = Class.forName("org.yaml.snakeyaml.internal.Logger", false, l);
            } catch (LinkageError e) {
                throw new AssertionError("with " + jar.getFileName() + " before " + snakeyaml.getFileName()
                        + " SnakeYAML's own class does not load: " + e, e);
            }
            assertEquals(snakeyaml.toUri().toURL(), c.getProtectionDomain().getCodeSource().getLocation());
        }
    }

    /**
     * Hadoop's NodeManager declares JNA as a compile dependency (its distribution ships it in
     * share/hadoop/yarn/lib, the directory README tells the user to put this jar in); the drop-in jar carries JNA's
     * com.sun.jna classes unrelocated, so two JNA versions meet on the NodeManager's class path and which one a class
     * comes from depends on the order of a directory listing. Whatever the jar carries must not be a library the
     * NodeManager itself ships.
     */
    @Test
    void carriesNoLibraryTheNodeManagerShipsItself() throws Exception {
        Path pom = nodeManagerPom();
        String text = Files.readString(pom);
        Set<String> declared = new TreeSet<>();
        Matcher m = Pattern.compile("<dependency>\\s*<groupId>([^<]+)</groupId>\\s*<artifactId>([^<]+)</artifactId>"
                + "((?:(?!</dependency>).)*)</dependency>", Pattern.DOTALL).matcher(text);
        while (m.find()) {
            String rest = m.group(3);
            if (!rest.contains("<scope>test</scope>") && !rest.contains("<scope>provided</scope>")
                    && !rest.contains("<optional>true</optional>")) {
                declared.add(m.group(1) + ":" + m.group(2));
            }
        }
        Set<String> inJar = new TreeSet<>();
        try (ZipFile z = new ZipFile(jar.toFile())) {
            if (z.getEntry("com/sun/jna/Native.class") != null) {
                inJar.add("net.java.dev.jna:jna");
            }
            if (z.getEntry("com/fasterxml/jackson/databind/ObjectMapper.class") != null) {
                inJar.add("com.fasterxml.jackson.core:jackson-databind");
            }
            if (z.getEntry("org/yaml/snakeyaml/Yaml.class") != null) {
                inJar.add("org.yaml:snakeyaml");
            }
        }
        inJar.retainAll(declared);
        assertEquals(Set.of(), inJar, "libraries both in " + jar.getFileName() + " (unrelocated) and among the"
                + " NodeManager's own dependencies (" + pom.getFileName() + "): two versions on one class path");
    }

    private static Path nodeManagerPom() {
        for (ClassPathEntry ce : ClassPathEntry.current()) {
            String e = ce.path().toString();
            if (ce.isArtifact("hadoop-yarn-server-nodemanager")) {
                Path pom = Path.of(e.replaceFirst("\\.jar$", ".pom"));
                if (Files.isRegularFile(pom)) {
                    return pom;
                }
            }
        }
        throw new AssertionError("hadoop-yarn-server-nodemanager's POM is not beside its jar on the class path");
    }

    /**
     * The jar alone beside the NodeManager's own class path (Hadoop's jars from Maven, no gpusched module, no test
     * tool), in a child JVM: the plug-in is built as the NodeManager builds it (no-argument constructor, setConf with
     * README's settings and a simulated node), reports 8 GPUs and chooses 2 for a container.
     */
    @Test
    void pluginWorksWithTheJarAloneOnTheNodeManagersClassPath(@org.junit.jupiter.api.io.TempDir Path tmp)
            throws Exception {
        List<String> cp = new ArrayList<>();
        for (ClassPathEntry e : ClassPathEntry.current()) {
            // gpusched's own modules (build outputs, module jars, any installed copy): by their classes, not paths
            boolean gpusched = e.isGpusched();
            boolean tool = e.isArtifactStartingWith("junit", "opentest4j", "apiguardian", "assertj", "byte-buddy",
                    "jmh", "mockito")
                    // libraries the jar must bring itself (relocated), not take from this test's path; JNA stays:
                    // the NodeManager ships its own, and the jar leaves it out
                    || e.isArtifact("snakeyaml");
            if (!gpusched && !tool) {
                cp.add(e.path().toString());
            }
        }
        cp.add(Path.of("target", "test-classes").toAbsolutePath().toString()); // the child's main only
        cp.add(jar.toAbsolutePath().toString());
        Path state = Files.createDirectories(tmp.resolve("state"));
        Files.setPosixFilePermissions(state, java.nio.file.attribute.PosixFilePermissions.fromString("rwx------"));
        ProcessBuilder pb = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", String.join(File.pathSeparator, cp), Child.class.getName(), state.toString())
                .redirectErrorStream(true);
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(p.waitFor(120, java.util.concurrent.TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("devices=8 chosen=2"), out);
    }

    /** The NodeManager's side, in the child JVM. */
    public static final class Child {
        public static void main(String[] args) throws Exception {
            if (Child.class.getClassLoader().getResource("io/gpusched/core/GpuScheduler.class").toString()
                    .indexOf("gpusched-yarn-") < 0) {
                throw new AssertionError("gpusched is not coming from the drop-in jar");
            }
            org.apache.hadoop.conf.Configuration c = new org.apache.hadoop.conf.Configuration();
            c.set("gpusched.yarn.inventory", "simulated:dgx1-v100");
            c.set("gpusched.yarn.state-dir", args[0]);
            c.set("gpusched.yarn.health-interval-ms", "0");
            io.gpusched.yarn.GpuschedDevicePlugin p = org.apache.hadoop.util.ReflectionUtils.newInstance(
                    io.gpusched.yarn.GpuschedDevicePlugin.class, c);
            java.util.Set<org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device> all = p.getDevices();
            java.util.Map<String, String> env = new java.util.HashMap<>();
            env.put("CONTAINER_ID", "container_1700000000000_0001_01_000002");
            int chosen = p.allocateDevices(all, 2, env).size();
            p.onDevicesAllocated(p.allocateDevices(all, 2, env),
                    org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.YarnRuntimeType.RUNTIME_DOCKER);
            p.close();
            System.out.println("devices=" + all.size() + " chosen=" + chosen);
        }
    }

    /** The manifest names the version the file name carries. */
    @Test
    void manifestCarriesTheJarsVersion() throws Exception {
        String version = jar.getFileName().toString().replaceFirst("^gpusched-yarn-", "").replaceFirst("\\.jar$", "");
        try (JarFile jf = new JarFile(jar.toFile());
             InputStream in = jf.getInputStream(jf.getEntry(JarFile.MANIFEST_NAME))) {
            java.util.jar.Manifest mf = new java.util.jar.Manifest(in);
            assertEquals(version, mf.getMainAttributes().getValue("Implementation-Version"));
        }
        assertTrue(version.matches("\\d+\\.\\d+\\.\\d+.*"), version);
    }
}
