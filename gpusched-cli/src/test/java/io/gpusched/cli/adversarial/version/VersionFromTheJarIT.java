package io.gpusched.cli.adversarial.version;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarFile;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.w3c.dom.Element;
import org.w3c.dom.Node;

/**
 * {@code gpusched --version} as a user runs it: {@code java -jar gpusched-cli/target/gpusched.jar --version} in a
 * child JVM started from another working directory, with nothing on its class path but what the jar's manifest names.
 * It must print {@code gpusched <the root pom's version>}, read from pom.xml with the JDK's XML parser, and so must
 * {@code -V}; the version the server jar beside it reports ({@code lib/gpusched-server-*.jar}) is the same.
 */
@Tag("adversarial")
class VersionFromTheJarIT {

    @TempDir
    Path elsewhere;

    private static String pomVersion() throws Exception {
        Path pom = Path.of("..", "pom.xml").toAbsolutePath().normalize();
        DocumentBuilderFactory f = DocumentBuilderFactory.newInstance();
        f.setFeature("http://apache.org/xml/features/disallow-doctype-decl", true);
        Element project = f.newDocumentBuilder().parse(pom.toFile()).getDocumentElement();
        for (Node n = project.getFirstChild(); n != null; n = n.getNextSibling()) {
            if (n instanceof Element e && e.getTagName().equals("version")) {
                return e.getTextContent().trim();
            }
        }
        throw new AssertionError("no <version> in " + pom);
    }

    private String run(Path jar, String flag) throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder pb = new ProcessBuilder(List.of(java, "-jar", jar.toString(), flag))
                .directory(elsewhere.toFile()).redirectErrorStream(true);
        pb.environment().remove("CLASSPATH");
        pb.environment().remove("JAVA_TOOL_OPTIONS");
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("the jar answered").isTrue();
        assertThat(p.exitValue()).as("exit code of java -jar gpusched.jar " + flag + ": " + out).isZero();
        return out;
    }

    @Test
    void theJarAUserRunsPrintsThePomsVersion() throws Exception {
        Path jar = Path.of("target", "gpusched.jar").toAbsolutePath();
        assertThat(jar).as("built by package, before integration tests").isRegularFile();
        String version = pomVersion();
        assertThat(run(jar, "--version").strip()).isEqualTo("gpusched " + version);
        assertThat(run(jar, "-V").strip()).isEqualTo("gpusched " + version);
        // the server jar the manifest's class path names is the one built with this version
        try (JarFile j = new JarFile(jar.toFile())) {
            String cp = j.getManifest().getMainAttributes().getValue("Class-Path");
            assertThat(cp).contains("lib/gpusched-server-" + version + ".jar");
            assertThat(Files.isRegularFile(jar.getParent().resolve("lib/gpusched-server-" + version + ".jar")))
                    .isTrue();
        }
        assertThat(File.separator).isEqualTo("/");
    }
}
