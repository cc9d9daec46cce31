package io.gpusched.testing;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * An entry is what its artifact and its classes say, wherever it lies (issue 32: a local Maven repository at
 * {@code /tmp/gpusched-m2} made every dependency look like gpusched to a test that matched the word). The jars here
 * lie under a root whose path holds every word the old substring checks looked for.
 */
class ClassPathEntryTest {
    @TempDir
    Path tmp;

    /** A Maven repository under a path full of misleading words. */
    Path repo() throws IOException {
        return Files
                .createDirectories(tmp.resolve("gpusched-m2/org/junit/io/gpusched/junit-x/net/java/dev/jna/target"));
    }

    static Path jar(Path repo, String group, String artifact, String version, String classifier, String... entries)
            throws IOException {
        Path dir = Files.createDirectories(repo.resolve(group.replace('.', '/')).resolve(artifact).resolve(version));
        Path jar = dir.resolve(artifact + "-" + version + (classifier == null ? "" : "-" + classifier) + ".jar");
        try (OutputStream out = Files.newOutputStream(jar); ZipOutputStream z = new ZipOutputStream(out)) {
            for (String e : entries) {
                z.putNextEntry(new ZipEntry(e));
                z.closeEntry();
            }
        }
        return jar;
    }

    @Test
    void aDependencyUnderAMisleadingPathIsWhatItsArtifactAndClassesSay() throws Exception {
        Path repo = repo();
        ClassPathEntry yaml = ClassPathEntry.of(jar(repo, "org.yaml", "snakeyaml", "2.2", null,
                "org/yaml/snakeyaml/Yaml.class").toString());
        assertThat(yaml.artifactId()).isEqualTo("snakeyaml");
        assertThat(yaml.isGpusched()).isFalse();
        assertThat(yaml.isTestTool()).isFalse();
        assertThat(yaml.carries("org/yaml/snakeyaml/")).isTrue();
        ClassPathEntry hadoop = ClassPathEntry.of(jar(repo, "org.apache.hadoop", "hadoop-yarn-server-nodemanager",
                "3.4.1", "tests", "org/apache/hadoop/Foo.class").toString());
        assertThat(hadoop.artifactId()).isEqualTo("hadoop-yarn-server-nodemanager");
        assertThat(hadoop.isGpusched()).isFalse();
        ClassPathEntry junit = ClassPathEntry.of(jar(repo, "org.junit.jupiter", "junit-jupiter-api", "5.10.2", null,
                "org/junit/jupiter/api/Test.class").toString());
        assertThat(junit.isTestTool()).isTrue();
        ClassPathEntry core = ClassPathEntry.of(jar(repo, "io.gpusched", "gpu-core", "0.1.0-SNAPSHOT", null,
                "io/gpusched/core/GpuScheduler.class").toString());
        assertThat(core.isGpusched()).isTrue();
        assertThat(core.artifactId()).isEqualTo("gpu-core");
    }

    @Test
    void buildOutputsAndLooseJarsToo() throws Exception {
        Path classes = tmp.resolve("junit/gpusched/target/classes");
        Files.createDirectories(classes.resolve("io/gpusched/yarn"));
        assertThat(ClassPathEntry.of(classes.toString()).isGpusched()).isTrue();
        Path conf = Files.createDirectories(tmp.resolve("io/gpusched/conf"));
        assertThat(ClassPathEntry.of(conf.toString()).isGpusched()).as("a directory without gpusched's classes")
                .isFalse();
        Path dropIn = Files.createDirectories(tmp.resolve("target"));
        Path jar = dropIn.resolve("gpusched-yarn-0.1.0-SNAPSHOT.jar");
        try (ZipOutputStream z = new ZipOutputStream(Files.newOutputStream(jar))) {
            z.putNextEntry(new ZipEntry("io/gpusched/core/GpuScheduler.class"));
            z.closeEntry();
        }
        ClassPathEntry e = ClassPathEntry.of(jar.toString());
        assertThat(e.artifactId()).isEqualTo("gpusched-yarn");
        assertThat(e.isGpusched()).isTrue();
        List<ClassPathEntry> cp = ClassPathEntry.parse(conf + ":" + jar + "::");
        assertThat(cp).extracting(ClassPathEntry::isJar).containsExactly(false, true);
    }
}
