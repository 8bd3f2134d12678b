"""Board constraint files (``*.lpf``, ``*.xdc``), installed as package data of
``wanreduce.constraints`` so that ``wanreduce build`` finds them from a wheel too."""
