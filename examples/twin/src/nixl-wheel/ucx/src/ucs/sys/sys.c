/* sys.c (twin UCX) */
int ucs_get_page_size(void) { return 4096; }
