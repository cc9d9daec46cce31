package io.gpusched.cli.layering;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static org.assertj.core.api.Assertions.assertThat;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchRule;
import com.tngtech.archunit.library.dependencies.SlicesRuleDefinition;
import io.gpusched.core.GpuDevice;
import java.io.IOException;
import java.io.InputStream;
import java.lang.module.ModuleDescriptor;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.jar.JarFile;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The layering of docs/ARCHITECTURE.md ("Modules and what each may use"), checked on the compiled classes of every
 * module on this module's class path (all but examples and benchmarks). The text rules of
 * {@code config/checkstyle/import-control.xml} read import lines: a fully-qualified name in code, or one split over
 * two lines, passes them, but is still a dependency in the byte code, which this test reads (ArchUnit: field and
 * parameter types, calls, annotations, class literals, generic type arguments). What javac leaves no trace of (a
 * compile-time constant, inlined) is not seen here either.
 *
 * <p>{@code io.gpusched.core.internal}'s users are read from gpu-core's compiled {@code module-info.class} (its
 * qualified export), so the descriptor and this check cannot drift apart.
 */
class LayeringTest {
    private static final String ROOT = "io.gpusched";
    private static final String CORE = ROOT + ".core";
    private static final String CORE_INTERNAL = CORE + ".internal";

    private static JavaClasses classes;
    private static ModuleDescriptor core;

    /**
     * Each module's packages (its root package) and the gpusched packages it may use besides its own: a name ending
     * in {@code ..} is the package and its subpackages, one without is that package alone. gpu-core's internal package
     * is added from module-info where the module is among its qualified export's targets; other modules' internal
     * packages are their own.
     */
    private static final Map<String, List<String>> MAY_USE = Map.ofEntries(
            Map.entry("core", List.of()),
            Map.entry("testing", List.of()),
            Map.entry("nvml", List.of("core")),
            Map.entry("rocm", List.of("core")),
            Map.entry("cuda", List.of("core")),
            Map.entry("isolation", List.of("core")),
            Map.entry("cdi", List.of("core")),
            Map.entry("slurm", List.of("core")),
            Map.entry("kubernetes", List.of("core")),
            Map.entry("yarn", List.of("core", "cuda!")),
            Map.entry("spark", List.of("core")),
            Map.entry("flink", List.of("core")),
            Map.entry("accounting", List.of("core")),
            Map.entry("server", List.of("core", "accounting", "cuda!", "isolation!", "cdi!")),
            Map.entry("client", List.of("core")),
            Map.entry("service", List.of("core", "server!", "cuda!", "isolation!")),
            Map.entry("cli", List.of("core", "nvml!", "rocm!", "cuda!", "isolation!", "cdi!", "slurm!", "kubernetes!",
                    "yarn!", "spark!", "flink!", "accounting!", "server!", "client!", "service!")));

    @BeforeAll
    static void importTheCompiledClasses() throws IOException, URISyntaxException {
        classes = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
                .importPackages(ROOT);
        core = gpuCoreDescriptor();
    }

    /** gpu-core's compiled module descriptor, from where gpu-core's classes were loaded (a directory or its jar). */
    static ModuleDescriptor gpuCoreDescriptor() throws IOException, URISyntaxException {
        Path where = Path.of(GpuDevice.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        if (Files.isDirectory(where)) {
            try (InputStream in = Files.newInputStream(where.resolve("module-info.class"))) {
                return ModuleDescriptor.read(in);
            }
        }
        try (JarFile jar = new JarFile(where.toFile()); InputStream in = jar.getInputStream(
                jar.getJarEntry("module-info.class"))) {
            return ModuleDescriptor.read(in);
        }
    }

    /** @return the modules (root package names, such as {@code io.gpusched.nvml}) gpu-core exports its internals to */
    static Set<String> coreInternalReaders() {
        Set<String> to = new TreeSet<>();
        core.exports().stream().filter(e -> e.source().equals(CORE_INTERNAL)).forEach(e -> to.addAll(e.targets()));
        return to;
    }

    @Test
    void theClassesOfEveryModuleOnTheClassPathAreImported() {
        Set<String> seen = new TreeSet<>();
        for (JavaClass c : classes) {
            String rest = c.getPackageName().substring(ROOT.length() + 1);
            seen.add(rest.contains(".") ? rest.substring(0, rest.indexOf('.')) : rest);
        }
        assertThat(seen).as("every module this test rules is on the class path").containsAll(MAY_USE.keySet());
        assertThat(MAY_USE.keySet()).as("every gpusched package imported here is ruled").containsAll(seen);
    }

    @Test
    void coreInternalIsExportedOnlyToNamedModulesOfThisProject() {
        Set<String> to = coreInternalReaders();
        assertThat(core.exports()).as("gpu-core's module-info exports core.internal, qualified")
                .anySatisfy(e -> assertThat(e.source()).isEqualTo(CORE_INTERNAL));
        assertThat(to).as("module-info names gpusched modules only").isNotEmpty()
                .allSatisfy(m -> assertThat(MAY_USE).containsKey(m.substring(ROOT.length() + 1)));
        assertThat(core.exports()).as("core.internal is never exported to everyone")
                .noneSatisfy(e -> {
                    assertThat(e.source()).isEqualTo(CORE_INTERNAL);
                    assertThat(e.isQualified()).isFalse();
                });
    }

    static Stream<String> modules() {
        return MAY_USE.keySet().stream().sorted();
    }

    /** One module: no class of it uses a gpusched class outside what its row of the table allows. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("modules")
    void eachModuleUsesOnlyWhatItsRowAllows(String module) {
        String own = ROOT + "." + module;
        boolean readsCoreInternal = module.equals("core") || coreInternalReaders().contains(own);
        List<String> allowed = MAY_USE.get(module);
        DescribedPredicate<JavaClass> forbidden = DescribedPredicate.describe(
                "gpusched classes outside " + own + " and " + allowed
                        + (readsCoreInternal ? " (with core.internal, as module-info allows)" : " (not core.internal)"),
                c -> {
                    String p = c.getPackageName();
                    if (!within(p, ROOT) || within(p, own)) {
                        return false;
                    }
                    if (within(p, CORE_INTERNAL)) {
                        return !readsCoreInternal;
                    }
                    for (String a : allowed) {
                        boolean exact = a.endsWith("!");
                        String pkg = ROOT + "." + (exact ? a.substring(0, a.length() - 1) : a);
                        if (exact ? p.equals(pkg) : within(p, pkg) && !isInternal(p, pkg)) {
                            return false;
                        }
                    }
                    return true;
                });
        ArchRule rule = noClasses().that().resideInAPackage(own + "..").should().dependOnClassesThat(forbidden)
                .because("docs/ARCHITECTURE.md: " + module + " may use " + allowed);
        rule.check(classes);
    }

    /** gpu-core's internal package: used by gpu-core and the modules its module-info exports it to, no other. */
    @Test
    void coreInternalIsUsedOnlyWhereModuleInfoAllows() {
        Set<String> readers = coreInternalReaders();
        List<String> may = Stream.concat(Stream.of(CORE), readers.stream()).map(r -> r + "..").toList();
        noClasses().that().resideOutsideOfPackages(may.toArray(String[]::new)).should().dependOnClassesThat()
                .resideInAPackage(CORE_INTERNAL + "..")
                .because("gpu-core's module-info.java exports core.internal to " + readers + " only").check(classes);
    }

    /** Every other module's internal package is its own. */
    @Test
    void internalPackagesAreTheirModulesOwn() {
        for (String module : MAY_USE.keySet()) {
            if (module.equals("core")) {
                continue;
            }
            String own = ROOT + "." + module;
            noClasses().that().resideOutsideOfPackage(own + "..").should().dependOnClassesThat()
                    .resideInAPackage(own + ".internal..").because(own + ".internal is " + module + "'s own")
                    .allowEmptyShould(true).check(classes);
        }
    }

    @Test
    void backendsNeverDependOnEachOther() {
        SlicesRuleDefinition.slices().matching(ROOT + ".(nvml|rocm|isolation|cuda)..").should().notDependOnEachOther()
                .because("docs/ARCHITECTURE.md: backends never depend on each other").check(classes);
    }

    @Test
    void theClientPullsInNeitherTheServerNorJetty() {
        noClasses().that().resideInAPackage(ROOT + ".client..").should().dependOnClassesThat()
                .resideInAnyPackage(ROOT + ".server..", "org.eclipse.jetty..", CORE_INTERNAL + "..")
                .because("an embedding host running as an ordinary user depends on gpusched-client and gpu-core's"
                        + " public API alone")
                .check(classes);
    }

    private static boolean within(String pkg, String root) {
        return pkg.equals(root) || pkg.startsWith(root + ".");
    }

    private static boolean isInternal(String pkg, String module) {
        return within(pkg, module + ".internal");
    }
}
