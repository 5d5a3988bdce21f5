/* not_a_plugin.c - a shared library without eddy's plugin symbols. */
int not_a_plugin_answer(void);
int not_a_plugin_answer(void)
{
    return 42;
}
