package io.gpusched.testing;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

/**
 * One entry of a class path, known by what it is, never by the directories it happens to lie in: a local Maven
 * repository under {@code /tmp/gpusched-m2}, a checkout under {@code /home/junit/}, or a repository inside the checkout
 * change nothing. A jar's artifact is read from its own name and, in a Maven repository, the two directories just
 * above it ({@code <artifactId>/<version>/<artifactId>-<version>[-classifier].jar}); what an entry carries is read from
 * its entries (a jar's names, a directory's sub-directories). Tests that build class paths for other JVMs (a
 * NodeManager, a Spark or Flink distribution, a drop-in jar alone) sort the entries with it.
 *
 * @param path       the entry
 * @param artifactId the jar's Maven artifact id ({@code snakeyaml}, {@code gpu-core}, {@code gpusched-yarn}), empty for
 *                   a directory
 */
public record ClassPathEntry(Path path, String artifactId) {
    private static final Pattern VERSIONED = Pattern.compile("(.+?)-[0-9][^/]*\\.jar");
    private static final Map<Path, List<String>> NAMES = new ConcurrentHashMap<>();

    /**
     * @return the test JVM's class path, entry by entry ({@code surefire.test.class.path} where surefire or failsafe
     *         started the JVM through a manifest-only jar, else {@code java.class.path})
     */
    public static List<ClassPathEntry> current() {
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        return parse(cp);
    }

    /** @return the entries of a class path string ({@code a.jar:b.jar:dir}) */
    public static List<ClassPathEntry> parse(String classPath) {
        List<ClassPathEntry> out = new ArrayList<>();
        for (String e : classPath.split(File.pathSeparator)) {
            if (!e.isEmpty()) {
                out.add(of(e));
            }
        }
        return out;
    }

    /** @return the entry at this path */
    public static ClassPathEntry of(String entry) {
        Path p = Path.of(entry);
        String name = p.getFileName() == null ? "" : p.getFileName().toString();
        if (!name.endsWith(".jar")) {
            return new ClassPathEntry(p, "");
        }
        Path version = p.getParent();
        Path artifact = version == null ? null : version.getParent();
        if (artifact != null && artifact.getFileName() != null) {
            String a = artifact.getFileName().toString();
            if (name.startsWith(a + "-" + version.getFileName() + ".") || name.startsWith(a + "-" + version
                    .getFileName() + "-")) {
                return new ClassPathEntry(p, a);
            }
        }
        Matcher m = VERSIONED.matcher(name);
        return new ClassPathEntry(p, m.matches() ? m.group(1) : name.substring(0, name.length() - 4));
    }

    /** @return whether it is a jar (else a directory of classes or resources) */
    public boolean isJar() {
        return !artifactId.isEmpty();
    }

    /** @return whether its artifact id is one of these */
    public boolean isArtifact(String... ids) {
        return isJar() && Arrays.asList(ids).contains(artifactId);
    }

    /** @return whether its artifact id starts with one of these ({@code junit} for junit-jupiter-api, ...) */
    public boolean isArtifactStartingWith(String... prefixes) {
        return isJar() && Arrays.stream(prefixes).anyMatch(artifactId::startsWith);
    }

    /**
     * @return whether it is one of this build's test tools, never part of a deployment: JUnit, AssertJ, opentest4j,
     *         apiguardian, Byte Buddy, Mockito, JMH, Jazzer, jqwik, Surefire's and Failsafe's own jars
     */
    public boolean isTestTool() {
        return isArtifactStartingWith("junit-", "assertj-", "opentest4j", "apiguardian-", "byte-buddy", "mockito-",
                "jmh-", "jazzer", "jqwik", "surefire", "failsafe", "common-java5", "common-junit");
    }

    /**
     * @param packagePath a package as a path with a trailing slash ({@code com/sun/jna/})
     * @return whether the entry holds anything in that package or below it
     */
    public boolean carries(String packagePath) {
        if (!isJar()) {
            return Files.isDirectory(path.resolve(packagePath));
        }
        return names().stream().anyMatch(n -> n.startsWith(packagePath));
    }

    /**
     * @return whether it holds gpusched's own classes ({@code io/gpusched/}): a module's build output or jar, an
     *         installed copy, a shaded drop-in jar
     */
    public boolean isGpusched() {
        return carries("io/gpusched/");
    }

    private List<String> names() {
        return NAMES.computeIfAbsent(path.toAbsolutePath(), p -> {
            if (!Files.isRegularFile(p)) {
                return List.of();
            }
            List<String> names = new ArrayList<>();
            try (ZipFile z = new ZipFile(p.toFile())) {
                for (Enumeration<? extends ZipEntry> en = z.entries(); en.hasMoreElements();) {
                    names.add(en.nextElement().getName());
                }
            } catch (IOException e) {
                throw new UncheckedIOException("class path entry " + p + " is not a readable jar", e);
            }
            return List.copyOf(names);
        });
    }

    @Override
    public String toString() {
        return path.toString();
    }
}
