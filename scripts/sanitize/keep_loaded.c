/* Preloaded into the sanitizer test run (scripts/dev.sh sanitize): dlclose()
 * does nothing, so shared objects stay mapped until the process exits.
 *
 * Open MPI (4.1) opens every MCA component with dlopen and closes the unused
 * ones during MPI_Init, and the rest at MPI_Finalize. Once a component is
 * unloaded, LeakSanitizer can no longer name the module that made an
 * allocation ("<unknown module>"), or names whichever module was mapped at
 * the same address later - and the suppressions in lsan.supp, which match
 * module and function names, then miss or hit the wrong reports. Open MPI 5
 * has mca_base_component_disable_dlclose for this; 4.1 does not.
 */
int dlclose(void *handle) {
  (void)handle;
  return 0;
}
